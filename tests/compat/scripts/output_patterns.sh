#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -J pat
#SBATCH -o out-%j-%x.log
#SBATCH -e err-%j-%x.log
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo to-stdout
echo to-stderr >&2
