#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH --exclusive
#SBATCH -p t4
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo "cpus on node: $SLURM_CPUS_ON_NODE"
