#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -N 2
#SBATCH --ntasks-per-node=2
#SBATCH --gres=gpu:a100:2
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
srun bash -c 'echo "rank $SLURM_PROCID of $SLURM_NTASKS local $SLURM_LOCALID"' | sort > ranks.txt
srun -l hostname | wc -l
