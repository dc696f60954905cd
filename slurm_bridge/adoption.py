"""Plain sbatch jobs held in a metasched-managed partition: how they are recognised, read and released.

``deploy/slurm/job_submit.lua`` holds every user's job in a managed partition (priority 0, so
squeue shows ``PD (JobHeldUser)``) and marks it with the admin comment ``metasched:adopt``,
which only an operator or that script can set. squeue's ``--Format`` has no admin comment, so
candidates are picked from squeue (pending, held, priority 0, in a managed partition) and the
mark is confirmed in ``scontrol -o show job``, which also gives the job's full request.
Releasing is two commands, argv lists: ``scontrol update JobId=N NodeList=... Comment=<tag>``
(the attempt's tag, so the reconciler follows the job like any launched attempt) and
``scontrol release N``; both are idempotent.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from dataclasses import dataclass
from datetime import datetime

from slurm_bridge import hostlist
from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.scontrol import ScontrolJob
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.parse.tres import parse_tres
from slurm_bridge.parse.values import elapsed_seconds, local_time

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


def _id_pair(value: str, what: str) -> tuple[str, int]:
    """_id_pair reads ``alice(2001)`` into ("alice", 2001)."""
    name, _, rest = value.partition("(")
    number = rest.rstrip(")")
    if not number.isdigit():
        raise SlurmParseError(f"scontrol show job: bad {what} {value!r}")
    return name, int(number)


def _nodes(value: str | None) -> tuple[str, ...]:
    value = (value or "").strip()
    return () if value in ("", "(null)", "None") else tuple(hostlist.expand(value))


def held_job(job: ScontrolJob) -> HeldJob:
    """held_job reads a ``scontrol -o show job`` record into a HeldJob (per-node amounts from its requested TRES)."""
    raw = job.raw
    user, uid = _id_pair(raw.get("UserId", ""), "UserId")
    _, gid = _id_pair(raw.get("GroupId", ""), "GroupId")
    nodes = int(raw.get("NumNodes", "1").split("-")[0] or 1)  # a pending job's count may read "2-2"
    tres = parse_tres(raw.get("TRES"))
    submitted = local_time(raw.get("SubmitTime", ""))
    if submitted is None:
        raise SlurmParseError(f"scontrol show job {job.job_id}: no SubmitTime")
    per_node = max(nodes, 1)
    return HeldJob(
        job_id=job.job_id,
        name=job.name,
        user=user,
        uid=uid,
        gid=gid,
        account=job.account,
        qos=job.qos,
        partition=job.partition,
        time_limit_s=elapsed_seconds(raw.get("TimeLimit", "UNLIMITED")),
        nodes=per_node,
        cpus_per_node=max(1, -(-tres.cpus // per_node)),
        memory_mib_per_node=-(-tres.memory_mib // per_node),
        gpus_per_node=tres.gpus // per_node,
        gpu_type=tres.gpu_type,
        work_dir=raw.get("WorkDir", ""),
        submitted_at=submitted,
        required_nodes=_nodes(raw.get("ReqNodeList")),
        excluded_nodes=_nodes(raw.get("ExcNodeList")),
        marked=raw.get("AdminComment", "").strip() == ADOPT_MARK,
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
