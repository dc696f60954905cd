#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -D data
#SBATCH -o run-%j.log
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
wc -l < input.txt
echo "in $PWD"
