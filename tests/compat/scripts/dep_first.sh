#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
sleep 5
echo "stage 1" > data/stage1.txt
