#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
# compat-after: set_e_fails.sh afternotok
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "handling the failure"
