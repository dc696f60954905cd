#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --mail-type=END,FAIL
#SBATCH --mail-user=alice
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo mailed
