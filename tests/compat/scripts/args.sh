#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
# compat-args: alpha "beta gamma"
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "$# args: $1 / $2"
