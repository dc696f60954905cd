"""Does a held job read the same in every source? (adoption, finding S3 of issue 22)

``HeldJob`` comes from ``squeue --json``: a field there is a field, whatever a user writes in
their job name, script path, working folder or output paths. Two other reads of the same job
must agree with it, or the job is refused (and the refusal audited by the adopter):

- squeue's ``--Format`` row (the daemon's read, fixed columns): user name, account, partition,
  submit time. A name holding a newline or the column separator shifts those columns.
- ``scontrol -o show job``'s record: a key seen twice is free text posing as a field (refused as
  such); otherwise UserId, GroupId, Account, Partition, QOS, NumNodes, TRES and AdminComment
  must say what the JSON says.

The reasons name fields only, never the user's text: they go into the job's comment and the audit.
"""

from __future__ import annotations

from collections.abc import Callable

from slurm_bridge.adoption import ADOPT_MARK, HeldJob
from slurm_bridge.parse.scontrol import ScontrolJob
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.parse.tres import parse_tres

_NULL = ("", "(null)", "N/A", "None")


def _id_pair(value: str) -> tuple[str, int | None]:
    """_id_pair reads ``alice(2001)`` into ("alice", 2001); (value, None) when it is not that shape."""
    name, _, rest = value.partition("(")
    number = rest.removesuffix(")")
    return (name, int(number)) if rest.endswith(")") and number.isdigit() else (value, None)


def _node_count(value: str) -> int | None:
    """_node_count reads NumNodes (``2`` or a pending job's ``2-2``) as its lower bound."""
    low = value.split("-")[0]
    return int(low) if low.isdigit() else None


def _same_tres(job: HeldJob, value: str) -> bool:
    """_same_tres: the record's TRES names the JSON's CPUs, memory, nodes and GPUs per type."""
    tres = parse_tres(None if value in _NULL else value)
    mine = job.tres
    return (tres.cpus, tres.memory_mib, tres.nodes, tres.gpus, tres.gpus_by_type) == (
        mine.cpus, mine.memory_mib, mine.nodes, mine.gpus, mine.gpus_by_type
    )  # fmt: skip


def squeue_disagreements(job: HeldJob, row: SqueueJob) -> list[str]:
    """squeue_disagreements names the squeue columns that do not say what the JSON says."""
    checks = {
        "user": row.user_name == job.user,
        "account": row.account == job.account,
        "partition": row.partition == job.partition,
        "submit time": row.submit_time is not None
        and abs((row.submit_time - job.submitted_at).total_seconds()) < 1,
    }
    return [f"squeue's {name}" for name, same in checks.items() if not same]


def _record_checks(job: HeldJob) -> dict[str, Callable[[str], bool]]:
    """_record_checks are, per scontrol key, whether its value says what the JSON says."""
    return {
        "UserId": lambda value: _id_pair(value) == (job.user, job.uid),
        "GroupId": lambda value: _id_pair(value)[1] == job.gid,
        "Account": lambda value: value == job.account,
        "Partition": lambda value: value == job.partition,
        "QOS": lambda value: value == job.qos,
        "NumNodes": lambda value: _node_count(value) == job.nodes,
        "TRES": lambda value: _same_tres(job, value),
        "AdminComment": lambda value: (value.strip() == ADOPT_MARK) == job.marked,
    }


def record_disagreements(job: HeldJob, record: ScontrolJob) -> list[str]:
    """record_disagreements names scontrol's repeated keys, or else its fields that do not say what the JSON says."""
    if record.duplicated:
        return [f"scontrol repeats {', '.join(sorted(record.duplicated))} (text posing as fields)"]
    raw = record.raw
    return [
        f"scontrol's {key}"
        for key, same in _record_checks(job).items()
        if key not in raw or not same(raw[key])
    ]


def disagreements(job: HeldJob, row: SqueueJob | None, records: list[ScontrolJob]) -> list[str]:
    """disagreements is why the sources of one held job do not agree ([] when they do).

    A name with a newline may make scontrol print a second record under any job id: one record
    that says what the JSON says is enough (a forged one cannot then block another user's job).
    """
    found = squeue_disagreements(job, row) if row is not None else ["squeue has no row"]
    if not records:
        return found + ["scontrol has no record"]
    per_record = [record_disagreements(job, record) for record in records]
    return found + (min(per_record, key=len) if all(per_record) else [])
