#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -n 4
#SBATCH -c 2
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
srun bash -c 'echo "$SLURM_PROCID cpus $SLURM_CPUS_PER_TASK"' | sort
