#!/bin/bash
#SBATCH --account=tenant-a
#SBATCH --time=00:02:00
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "about to fail"
exit 3
