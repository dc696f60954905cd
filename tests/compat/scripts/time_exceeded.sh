#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 1
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
echo start > started.txt
sleep 300
echo never > never.txt
