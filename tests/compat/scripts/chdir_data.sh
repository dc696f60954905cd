#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --chdir=data
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
cat input.txt | tr a-z A-Z > upper.txt
ls > listing.txt
