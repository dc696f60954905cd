#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --hold
# compat-release: 8
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "released and ran"
