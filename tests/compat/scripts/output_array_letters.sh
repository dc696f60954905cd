#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -o job-%A-%j.out
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "%A of a plain job is its id"
