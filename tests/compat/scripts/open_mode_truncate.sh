#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -o data/existing2.log
#SBATCH --open-mode=truncate
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo truncated
