#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
set -euo pipefail
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo step1 > progress.txt
grep -q nothing-here progress.txt
echo step2 >> progress.txt
