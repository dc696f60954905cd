#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 1
#SBATCH -N 1
#SBATCH --gpus=1
# no trap: a script that never expected a signal
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
sleep 50
echo finished > done.txt
