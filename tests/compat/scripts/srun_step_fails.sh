#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -N 1
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
srun bash -c "exit 7"
echo "step said $?"
