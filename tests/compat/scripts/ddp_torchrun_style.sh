#!/bin/bash
#SBATCH --job-name=ddp
#SBATCH --account=tenant-a
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=4
#SBATCH --mem=8G
#SBATCH --time=00:03:00
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
export MASTER_PORT=29500
echo "world $((SLURM_NNODES * 1)) nodes $SLURM_JOB_NUM_NODES cpus $SLURM_CPUS_PER_TASK mem $SLURM_MEM_PER_NODE"
srun bash -c 'echo "node-rank $SLURM_NODEID"' | sort
