#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --output=%x_%u_%%.txt
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "user pattern"
