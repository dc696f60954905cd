#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --array=0-2
#SBATCH -e err-%A_%a.txt
#SBATCH -o out-%A_%a.txt
env | grep "^SLURM_" | sort > "env-task$SLURM_ARRAY_TASK_ID.txt"; pwd > "pwd-task$SLURM_ARRAY_TASK_ID.txt"
if [ "$SLURM_ARRAY_TASK_ID" = 1 ]; then echo "bad shard" >&2; exit 4; fi
echo ok
