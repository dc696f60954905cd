#!/bin/bash
#SBATCH --account=robotics
#SBATCH --nodes=2
#SBATCH --ntasks=16
#SBATCH --gpus=h100:16
#SBATCH --cpus-per-task=12
#SBATCH --mem-per-cpu=8000
#SBATCH --time=12:00:00

# One task per GPU; torch.distributed picks up SLURM_PROCID/SLURM_NTASKS.
srun python -u train_policy.py --world-size "$SLURM_NTASKS" --seed 7
