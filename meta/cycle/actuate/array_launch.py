"""For step 13 (actuate): what makes an array element's Slurm job look like an element of an sbatch array.

Each element is its own Slurm job (metasched places elements independently, so Slurm never
makes an array of them). The element gets the ``SLURM_ARRAY_*`` variables sbatch gives an
element, with the metasched job's id (what msbatch printed) as ``SLURM_ARRAY_JOB_ID``, and its
``-o/-e`` patterns have ``%A`` and ``%a`` expanded before sbatch sees them (Slurm would expand
them for a plain job as its own id and ``4294967294``). Without ``-o``, a job that runs as its
user writes sbatch's array default, ``slurm-%A_%a.out`` in its working folder.
"""

from __future__ import annotations

from typing import Any

from meta.model.arrays import array_variables
from meta.model.spec import AnySpec
from meta.store.models import Job, Task
from slurm_bridge.output_patterns import array_pattern_values, expand_patterns

ARRAY_DEFAULT_OUTPUT = "slurm-%A_%a.out"


def array_index(task: Task) -> int:
    """array_index is the element's index: an array job's tasks are named by their index."""
    return int(task.name)


def array_env(job: Job, task: Task, spec: AnySpec) -> dict[str, str]:
    """array_env is the SLURM_ARRAY_* variables of an array element ({} for a job that is not an array)."""
    if spec.array is None:
        return {}
    return array_variables(job.short_id, array_index(task), spec.array.indexes, spec.array.step)


def array_output_fields(job: Job, task: Task, spec: AnySpec, fields: dict[str, Any]) -> dict[str, Any]:
    """array_output_fields are the LaunchRequest's stdout/stderr with %A/%a expanded (sbatch's array default when unset)."""
    if spec.array is None:
        return {}
    values = array_pattern_values(job.short_id, array_index(task))
    out: dict[str, Any] = {}
    if fields.get("sbatch_default_output") and not fields.get("stdout"):
        out.update(stdout=ARRAY_DEFAULT_OUTPUT, sbatch_default_output=False)
    for stream in ("stdout", "stderr"):
        pattern = out.get(stream, fields.get(stream))
        if pattern:
            out[stream] = expand_patterns(pattern, values)
    return out
