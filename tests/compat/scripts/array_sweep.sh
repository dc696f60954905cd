#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --array=0-3
#SBATCH -o sweep-%A_%a.out
env | grep "^SLURM_" | sort > "env-task$SLURM_ARRAY_TASK_ID.txt"; pwd > "pwd-task$SLURM_ARRAY_TASK_ID.txt"
echo "lr index $SLURM_ARRAY_TASK_ID of $SLURM_ARRAY_TASK_COUNT (min $SLURM_ARRAY_TASK_MIN max $SLURM_ARRAY_TASK_MAX)"
