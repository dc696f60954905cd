"""For step 5 (adopt): the metasched spec of an adopted plain sbatch job: what Slurm stores about it, in metasched's words.

An adopted job is a training gang of ``-N`` workers, one per node (``sbatch:`` section: -N
counts nodes), each asking for the job's per-node CPUs, memory and GPUs, in the job's
partition and QOS, with its time limit (UNLIMITED: the longest limit a spec takes). It is never
preempted and never retried: Slurm runs the user's own batch script once, under the job id
the user was given, so a second attempt has nothing to run.
"""

from __future__ import annotations

import re

from meta.model.limits import MAX_DURATION_S
from meta.model.spec import TrainingSpec, spec_from_dict
from slurm_bridge.adoption import HeldJob

_NOT_NAME = re.compile(r"[^A-Za-z0-9._-]")


def adopted_name(job: HeldJob) -> str:
    """adopted_name is the Slurm job name made a metasched name (other characters become '_')."""
    name = _NOT_NAME.sub("_", job.name)[:128].lstrip("._-")
    return name or f"sbatch-{job.job_id}"


def adopted_spec(job: HeldJob) -> TrainingSpec:
    """adopted_spec is the spec metasched orders and places an adopted job by (SpecError if it has none)."""
    spec = spec_from_dict(
        {
            # one try, never preempted: a second attempt would have no batch script to run
            "kind": "training",
            "name": adopted_name(job),
            "tenant": job.account,
            "partition": job.partition or None,
            "qos": job.qos or None,
            "time_limit": float(min(job.time_limit_s, MAX_DURATION_S)) if job.time_limit_s else MAX_DURATION_S,
            "retry": {"max_attempts": 1, "on": []},
            "workers": job.nodes,
            "resources": {
                "cpus": job.cpus_per_node,
                "memory": job.memory_mib_per_node,
                "gpus": job.gpus_per_node,
                "gpu_type": job.gpu_type,
            },
            # never rendered: Slurm runs the job's own batch script when metasched releases it
            "command": f"# plain sbatch job {job.job_id}: Slurm runs its own batch script",
            # -N counts nodes (one worker per node); -w and -x stay hard filters
            "sbatch": {"nodelist": list(job.required_nodes), "exclude": list(job.excluded_nodes)},
        }
    )
    assert isinstance(spec, TrainingSpec)
    return spec
