#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
# compat-after: dep_first.sh afterok
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
cat data/stage1.txt > /dev/null 2>&1 && echo "saw stage 1" || echo "stage 1 missing"
