#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --export=NONE
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "FOO=${FOO-unset} USER=$USER HOME=$HOME"
echo "PATH=$PATH"
