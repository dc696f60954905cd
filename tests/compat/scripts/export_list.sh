#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --export=FOO,BAR=baz
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "FOO=${FOO-unset} BAR=${BAR-unset} OTHER=${OTHER-unset} USER=$USER"
