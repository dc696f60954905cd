#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --export=ALL,EXTRA=1
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "FOO=${FOO-unset} OTHER=${OTHER-unset} EXTRA=${EXTRA-unset} PATH=$PATH"
