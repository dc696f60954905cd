#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -e errors.log
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo out
echo err >&2
ls /nonexistent-path
