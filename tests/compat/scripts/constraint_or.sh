#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --constraint=t4|h100
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
case $SLURMD_NODENAME in a100*) echo wrong;; *) echo "not a100";; esac
