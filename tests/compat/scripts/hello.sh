#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -J hello
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "hello from $SLURM_JOB_NAME"
date +%Y > year.txt
