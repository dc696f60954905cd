#!/bin/bash
#
# Tokenise the crawl (CPU only).
#
#SBATCH --account=data
#SBATCH --partition=cpu
#SBATCH --cpus-per-task=32
#SBATCH --mem-per-cpu=3500M
#SBATCH --time=6:00:00

python tools/tokenise.py --workers "$SLURM_CPUS_PER_TASK" --in /data/crawl --out /data/tokens
