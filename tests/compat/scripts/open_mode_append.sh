#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -o data/existing.log
#SBATCH --open-mode=append
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo appended
