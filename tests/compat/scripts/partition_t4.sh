#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -p t4
#SBATCH --gres=gpu:t4:1
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "partition $SLURM_JOB_PARTITION"
