"""For step 13 (actuate): from a stored attempt to a LaunchRequest, nodes, per-node shapes, roles and environment."""

from __future__ import annotations

import os
from collections import defaultdict
from dataclasses import dataclass, field
from pathlib import Path

from meta.config.paths import default_log_dir
from meta.cycle.actuate.array_launch import array_env, array_output_fields
from meta.cycle.actuate.sbatch_launch import sbatch_env, sbatch_request_fields, working_dir
from meta.cycle.snapshot.build import placement_shares
from meta.model.kinds import JobKind
from meta.model.resources import ResourceVector
from meta.model.spec import AnySpec, InferenceSpec, TrainingSpec
from meta.store.models import Attempt, Job, Task
from slurm_bridge.launch import LaunchRequest, Role, RunAs, is_token


@dataclass(frozen=True)
class LaunchSettings:
    """LaunchSettings are site choices for rendered jobs: where logs go, the checkpoint grace.

    ``grace_s`` is how long a checkpointing job has between USR1 and the end: scancel after a
    preemption signal, or its time limit (``slurm_bridge.render`` caps it to fit short limits).
    """

    log_dir: str = field(default_factory=default_log_dir)  # never a shared /tmp path others create first
    grace_s: int = 60
    # METASCHED_API of every job: where its `metasched commit/checkpoint report` reach the service
    # (the daemon's Unix socket on this host, or its TCP listener); jobs never get the store's URL
    api_address: str | None = None
    # the uid sbatch runs as: a job owned by it runs as before; any other owner's job runs as its owner
    daemon_uid: int = field(default_factory=os.geteuid)
    # the store's site id, named in every job's tag (None: the Actuator reads it from its store)
    site: str | None = None


def run_as_for(job: Job, settings: LaunchSettings, spec: AnySpec | None = None) -> RunAs | None:
    """run_as_for is the user a job runs as (its owner, in its submit folder), None for the daemon's own jobs.

    Jobs without an owner (older than issue 12) and jobs the daemon's own user submitted (root's
    local mode) run as before, in the daemon's folder.
    """
    if job.owner_uid is None or job.owner_uid == settings.daemon_uid:
        return None
    gid = job.owner_gid if job.owner_gid is not None else job.owner_uid
    return RunAs(uid=job.owner_uid, gid=gid, chdir=working_dir(job, spec) if spec else job.submit_dir)


def job_output_dir(spec: InferenceSpec, job_short_id: str) -> str:
    """job_output_dir is ``<output>/<job id>/``: everything metasched writes for one inference job (staging, manifest).

    Two jobs given the same ``output`` (two msbatch jobs from one folder) never share a file.
    """
    return str(Path(spec.output) / job_short_id)


def staging_dir(spec: InferenceSpec, job_short_id: str, attempt_id: str) -> str:
    """staging_dir is the attempt-private output path ``<output>/<job id>/_attempts/<attempt>/``."""
    return str(Path(job_output_dir(spec, job_short_id)) / "_attempts" / attempt_id)


def _node_groups(attempt: Attempt) -> dict[int, list[tuple[str, ResourceVector]]]:
    """_node_groups groups the placement's nodes by how many workers each hosts."""
    per_node: dict[str, list[ResourceVector]] = defaultdict(list)
    for share in placement_shares(attempt.placement):
        per_node[share.node].append(share.resources)
    groups: dict[int, list[tuple[str, ResourceVector]]] = defaultdict(list)
    for node, shares in sorted(per_node.items()):
        total = shares[0]
        for extra in shares[1:]:
            total = total + extra
        groups[len(shares)].append((node, total))
    return groups


def launch_request(
    job: Job,
    task: Task,
    attempt: Attempt,
    spec: AnySpec,
    settings: LaunchSettings,
    resume_from: str | None = None,
    attempt_secret: str | None = None,
) -> LaunchRequest:
    """launch_request describes one attempt to the sbatch renderer (a het-job for uneven gangs).

    A job that runs as its user writes its output where sbatch would (``<submit dir>/slurm-%j.out``):
    the daemon's log folder is not the user's to write.
    """
    groups = _node_groups(attempt)
    as_user = run_as_for(job, settings) is not None
    env = dict(spec.env)
    if isinstance(spec, InferenceSpec):
        # scripts written for sbatch arrays read the partition from SLURM_ARRAY_TASK_ID
        env.setdefault("SLURM_ARRAY_TASK_ID", task.name)
    env.update(array_env(job, task, spec))
    env.update(sbatch_env(job, spec))
    log = f"{settings.log_dir.rstrip('/')}/{job.short_id}/{attempt.id}.out"
    checkpoint = spec.checkpoint if isinstance(spec, TrainingSpec) else None
    common = {
        "attempt_id": attempt.id,
        "attempt_number": attempt.number,
        "fencing_token": attempt.fencing_token,
        "job_id": job.id,
        "task_id": task.id,
        "tenant": job.tenant,
        "kind": JobKind(job.kind),
        "time_limit_s": int(spec.time_limit_s),
        "site": settings.site,
        "qos": spec.qos,
        "partition": spec.partition,
        "env": env,
        "secret_names": tuple(spec.secrets),
        "job_name": job.short_id,
        # Slurm shows the user's name (squeue NAME, SLURM_JOB_NAME); the attempt tag is the comment
        "slurm_name": job.name if job.name and is_token(job.name) else "",
        "task_name": task.name,
        "checkpoint_dir": checkpoint.dir if checkpoint else None,
        # only a job that declared a checkpoint is sent the checkpoint signal (render caps its grace)
        "checkpoints": checkpoint is not None,
        "output_dir": staging_dir(spec, job.short_id, attempt.id) if isinstance(spec, InferenceSpec) else None,
        "resume_from": resume_from,
        "grace_s": settings.grace_s,
        "stdout": None if as_user else log,
        "sbatch_default_output": as_user,
        "api_address": settings.api_address,
        "attempt_secret": attempt_secret,
        **sbatch_request_fields(job, spec, as_user),
    }
    common.update(array_output_fields(job, task, spec, common))
    if len(groups) <= 1:
        workers, members = next(iter(groups.items())) if groups else (1, [])
        per_node = members[0][1] if members else spec.worker_resources()
        return LaunchRequest(
            command=spec.command,
            script=spec.script,
            per_node=per_node,
            num_nodes=max(len(members), 1),
            nodes=tuple(node for node, _ in members),
            ntasks_per_node=workers,
            **common,
        )
    # workers spread unevenly (e.g. 3 on one node, 1 on another): one het component per shape
    roles = tuple(
        Role(
            name=f"w{workers}",
            per_node=members[0][1],
            command=spec.command or spec.script or "",
            num_nodes=len(members),
            nodes=tuple(node for node, _ in members),
            ntasks_per_node=workers,
        )
        for workers, members in sorted(groups.items())
    )
    return LaunchRequest(roles=roles, **common)

