#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --requeue
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo fine
