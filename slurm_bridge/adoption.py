"""Plain sbatch jobs held in a metasched-managed partition: how they are recognised, read and released.

``deploy/slurm/job_submit.lua`` holds every user's job in a managed partition (priority 0, so
squeue shows ``PD (JobHeldUser)``) and marks it with the admin comment ``metasched:adopt``,
which only an operator or that script can set. Candidates are picked from squeue (pending, held,
priority 0, in a managed partition); the job's owner, account, partition, shape and mark are read
from ``squeue --json`` (``held_job``), where a field is a field: ``scontrol -o show job`` prints a
user's free text (job name, script and output paths) raw among its ``Key=value`` pairs, so a path
holding `` UserId=alice(2001) Account=tenant-a`` read as alice's job (finding S3 of issue 22).
``adoption_check`` cross-checks the JSON against squeue's columns and scontrol's record.
Releasing is two commands, argv lists: ``scontrol update JobId=N NodeList=... Comment=<tag>``
(the attempt's tag, so the reconciler follows the job like any launched attempt) and
``scontrol release N``; both are idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from slurm_bridge import hostlist
from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.parse.tres import Tres, parse_tres
from slurm_bridge.parse.values import epoch, number, text

ADOPT_MARK = "metasched:adopt"  # the admin comment job_submit.lua sets (keep both in step)
HELD_REASONS = frozenset({"JobHeldUser", "JobHeldAdmin"})


@dataclass(frozen=True, slots=True)
class HeldJob:
    """HeldJob is a held plain sbatch job's request as Slurm stores it (per node amounts)."""

    job_id: int
    name: str
    user: str
    uid: int
    gid: int
    account: str
    qos: str
    partition: str
    time_limit_s: int | None  # None: UNLIMITED
    nodes: int
    cpus_per_node: int
    memory_mib_per_node: int
    gpus_per_node: int
    gpu_type: str | None
    work_dir: str
    submitted_at: datetime
    required_nodes: tuple[str, ...]
    excluded_nodes: tuple[str, ...]
    marked: bool  # the admin comment is ADOPT_MARK: job_submit.lua held it for metasched
    tres: Tres = Tres()  # the whole request, for the cross-check


def held_in(job: SqueueJob, partitions: Iterable[str]) -> bool:
    """held_in: squeue shows the job pending, held with priority 0, in one of ``partitions`` (not an array, not a het job)."""
    return (
        job.state == "PENDING"
        and job.partition in set(partitions)
        and job.state_reason in HELD_REASONS
        and not job.priority
        and job.array_task_id is None
        and job.het_job_id is None
    )


def _nodes(value: Any) -> tuple[str, ...]:
    value = text(value).strip()
    return () if value in ("", "(null)", "None") else tuple(hostlist.expand(value))


def _required(entry: Mapping[str, Any], key: str) -> int:
    """_required is a numeric field the job cannot be read without."""
    value = number(entry.get(key))
    if value is None or value < 0:
        raise SlurmParseError(f"squeue --json job {entry.get('job_id')}: no {key}")
    return value


def held_job(entry: Mapping[str, Any]) -> HeldJob:
    """held_job reads one ``squeue --json`` job into a HeldJob (per-node amounts from its requested TRES)."""
    job_id = _required(entry, "job_id")
    submitted = epoch(entry.get("submit_time"))
    if submitted is None:
        raise SlurmParseError(f"squeue --json job {job_id}: no submit_time")
    per_node = max(number(entry.get("node_count"), 1) or 1, 1)
    tres = parse_tres(text(entry.get("tres_req_str")))
    minutes = number(entry.get("time_limit"))  # None: UNLIMITED (v0.0.38), {"infinite": true} later
    return HeldJob(
        job_id=job_id,
        name=text(entry.get("name")),
        user=text(entry.get("user_name")),
        uid=_required(entry, "user_id"),
        gid=_required(entry, "group_id"),
        account=text(entry.get("account")),
        qos=text(entry.get("qos")),
        partition=text(entry.get("partition")),
        time_limit_s=minutes * 60 if minutes else None,
        nodes=per_node,
        cpus_per_node=max(1, -(-tres.cpus // per_node)),
        memory_mib_per_node=-(-tres.memory_mib // per_node),
        gpus_per_node=tres.gpus // per_node,
        gpu_type=tres.gpu_type,
        work_dir=text(entry.get("current_working_directory")),
        submitted_at=submitted,
        required_nodes=_nodes(entry.get("required_nodes")),
        excluded_nodes=_nodes(entry.get("excluded_nodes")),
        marked=text(entry.get("admin_comment")).strip() == ADOPT_MARK,
        tres=tres,
    )


def release_commands(job_id: int | str, nodes: Sequence[str], comment: str) -> list[list[str]]:
    """release_commands are the scontrol argv lists that put a held job on ``nodes`` with ``comment`` and release it."""
    job = str(job_id)
    if not job.isdigit() or not nodes:
        raise ValueError(f"cannot release job {job!r} onto {list(nodes)!r}")
    return [
        ["update", f"JobId={job}", f"NodeList={hostlist.compress(sorted(set(nodes)))}", f"Comment={comment}"],
        ["release", job],
    ]


def comment_command(job_id: int | str, comment: str) -> list[str]:
    """comment_command is the scontrol argv list that sets a held job's comment (what ``scontrol show job`` shows)."""
    job = str(job_id)
    if not job.isdigit():
        raise ValueError(f"not a Slurm job id: {job!r}")
    return ["update", f"JobId={job}", f"Comment={comment}"]
