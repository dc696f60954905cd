#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --array=1,3,5%2
#SBATCH -o shard-%a.log
env | grep "^SLURM_" | sort > "env-task$SLURM_ARRAY_TASK_ID.txt"; pwd > "pwd-task$SLURM_ARRAY_TASK_ID.txt"
sed -n "${SLURM_ARRAY_TASK_ID}p" data/input.txt > "line-$SLURM_ARRAY_TASK_ID.txt"
