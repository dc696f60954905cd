#!/bin/bash
#SBATCH -J embed-t4
#SBATCH -A search
#SBATCH -p t4
#SBATCH --array=0-15%4
#SBATCH -c 8
#SBATCH --mem-per-gpu=30G
#SBATCH --gres=gpu:t4:1
#SBATCH -t 02:00:00
#SBATCH -o out/%x/%A_%a.log

# One shard of the corpus per array task.
SHARD=$(printf "%05d" "$SLURM_ARRAY_TASK_ID")
python embed.py \
    --input  "/data/corpus/shard-${SHARD}.parquet" \
    --output "out/embeddings/shard-${SHARD}.npy" \
    --batch-size 256
