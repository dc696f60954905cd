#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -t 2
#SBATCH -J py-env
env | grep "^SLURM_" | sort > "env-$SLURM_JOB_ID.txt"; pwd > "pwd-$SLURM_JOB_ID.txt"
python3 - <<'PY'
import json, os
keys = ["SLURM_JOB_NAME", "SLURM_SUBMIT_DIR", "SLURM_JOB_ACCOUNT", "SLURM_NTASKS", "FOO"]
print(json.dumps({k: os.environ.get(k) for k in keys}, sort_keys=True))
PY
