#!/usr/bin/env bash
#SBATCH --account=vision
#SBATCH --partition=gpu
#SBATCH --gpus-per-node=1
#SBATCH --cpus-per-task=8
#SBATCH --mem=64G
#SBATCH --time=45

# Evaluate one checkpoint on the held-out set; the checkpoint comes as $1.
CKPT="${1:?usage: eval_1gpu.sh CHECKPOINT}"
python -m evals.imagenet --checkpoint "$CKPT" --split val --report "reports/$(basename "$CKPT").json"
