#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --begin=now+15
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "began"
