#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -o data/%x-%j.out
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "log in a subfolder"
