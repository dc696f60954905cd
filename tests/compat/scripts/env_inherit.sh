#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "FOO=${FOO-unset} OTHER=${OTHER-unset} HOME=$HOME LANG=$LANG"
