#!/bin/bash
#SBATCH -A tenant-a
#SBATCH --time=1
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
for i in $(seq 10); do echo "epoch $i" >> train.log; sleep 5; done
echo ok
