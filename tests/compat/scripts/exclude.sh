#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -x a100n[1-2],h100n[1-2],t4n1
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "on $SLURMD_NODENAME"
