#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -C h100
#SBATCH --gres=gpu:1
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "node type ${SLURMD_NODENAME%%n[0-9]*}"
