#!/bin/bash
# Llama-style pretraining: 2 nodes x 8 A100, one torchrun per node.
#SBATCH --job-name=llama7b-pretrain
#SBATCH --account=nlp
#SBATCH --partition=a100
#SBATCH --qos=high
#SBATCH --nodes=2
#SBATCH --ntasks-per-node=1
#SBATCH --cpus-per-task=96
#SBATCH --mem=960G
#SBATCH --gres=gpu:a100:8
#SBATCH --time=2-00:00:00          # two days
#SBATCH --signal=B:USR1@300        # time to write a checkpoint
#SBATCH --output=logs/%x-%j.out
#SBATCH --error=logs/%x-%j.err
#SBATCH --comment="pretrain run 42"

set -euo pipefail

export MASTER_ADDR=$(scontrol show hostnames "$SLURM_JOB_NODELIST" | head -n 1)
export MASTER_PORT=29500
export NCCL_IB_DISABLE=0

srun --kill-on-bad-exit=1 torchrun \
    --nnodes "$SLURM_NNODES" \
    --nproc_per_node 8 \
    --rdzv_id "$SLURM_JOB_ID" \
    --rdzv_backend c10d \
    --rdzv_endpoint "$MASTER_ADDR:$MASTER_PORT" \
    train.py --config configs/llama7b.yaml --resume auto

# Directives after the first command are ignored, as by sbatch:
#SBATCH --exclusive
