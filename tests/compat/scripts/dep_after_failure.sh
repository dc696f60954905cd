#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
# compat-after: exit_nonzero.sh afterany
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "cleanup after any end"
