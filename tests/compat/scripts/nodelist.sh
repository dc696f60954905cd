#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -w t4n2
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "on $SLURMD_NODENAME"
