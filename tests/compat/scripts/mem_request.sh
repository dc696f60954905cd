#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --mem=4G
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "mem $SLURM_MEM_PER_NODE"
