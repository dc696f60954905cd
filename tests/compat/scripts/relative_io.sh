#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
sort -r data/input.txt > data/sorted.txt
cp data/sorted.txt result.txt
