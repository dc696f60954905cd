"""Parse ``scontrol -o show node|job|reservation``: one line of ``Key=value`` pairs per object.

Values may contain spaces (``Reason=Not responding [slurm@...]``, ``OS=Linux 6.1 #1 SMP``), so a
new key starts only where whitespace is followed by a CamelCase ``Key=``. A free-text value that
itself contains `` Word=`` is split wrongly; Slurm gives no way to tell them apart, and a job's
free text is its user's (JobName, Command, WorkDir, StdOut, StdErr, StdIn, Comment): ``-o
"/x UserId=alice(2001)"`` prints a second UserId. So the first occurrence of a key wins (the
real one, where Slurm prints it before the free text), every repeated key is kept in
``duplicated``, and nothing that decides who owns a job or what it may use is read from here:
adoption reads ``squeue --json`` and only cross-checks this text (``slurm_bridge.adoption_check``).
A name with a newline splits a record over two lines; a line that is not a record is skipped and
logged, so one user's job name cannot blind the reader.
"""

from __future__ import annotations

import logging
import re
from dataclasses import dataclass, field
from datetime import datetime

from slurm_bridge import hostlist
from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.nodestate import NodeCondition, node_condition
from slurm_bridge.parse.tres import Gres, Tres, parse_gres, parse_tres
from slurm_bridge.parse.values import exit_pair, local_time
from slurm_bridge.states import Observed, map_state

_KEY = re.compile(r"(?:^|\s+)([A-Z][A-Za-z0-9_/:]*)=")
_NOTHING = ("No jobs in the system", "No nodes in the system", "No reservations in the system")
log = logging.getLogger("metasched.slurm")


def _pairs(line: str) -> list[tuple[str, str]]:
    """_pairs splits one ``-o`` line into its (key, value) pairs in order, repeats included."""
    matches = list(_KEY.finditer(line))
    if not matches or matches[0].start() != 0 and line[: matches[0].start()].strip():
        raise SlurmParseError(f"not a scontrol key=value line: {line[:200]!r}")
    ends = [following.start() for following in matches[1:]] + [len(line)]
    return [(key.group(1), line[key.end() : end].strip()) for key, end in zip(matches, ends, strict=True)]


def parse_kv_line(line: str) -> dict[str, str]:
    """parse_kv_line splits one ``-o`` line into an ordered key -> value mapping; a key's first occurrence wins."""
    record: dict[str, str] = {}
    for key, value in _pairs(line):
        record.setdefault(key, value)  # a later one is free text that looks like a key (see the module doc)
    return record


def duplicated_keys(line: str) -> frozenset[str]:
    """duplicated_keys are the keys one ``-o`` line holds more than once: free text posing as fields."""
    keys = [key for key, _ in _pairs(line)]
    return frozenset(key for key in keys if keys.count(key) > 1)


def record_lines(text: str) -> list[str]:
    """record_lines are the non-empty lines that start like a record; others are logged and skipped."""
    lines = [line for line in text.splitlines() if line.strip()]
    if len(lines) == 1 and lines[0].strip().startswith(_NOTHING):
        return []
    kept = []
    for line in lines:
        try:
            _pairs(line)
            kept.append(line)
        except SlurmParseError as error:  # e.g. the rest of a job name with a newline
            log.warning("skipping a scontrol line that is not a record: %s", error)
    if lines and not kept:
        raise SlurmParseError(f"scontrol: none of {len(lines)} lines is a record: {lines[0][:200]!r}")
    return kept


def parse_records(text: str) -> list[dict[str, str]]:
    """parse_records parses every record line; "No jobs in the system" gives []."""
    return [parse_kv_line(line) for line in record_lines(text)]


def _null(value: str | None) -> str:
    """_null maps Slurm's ``(null)``, ``N/A`` and ``None`` to ""."""
    return "" if value in (None, "(null)", "N/A", "None") else value


def _int(value: str | None, default: int = 0) -> int:
    """_int reads an integer field, tolerating absence."""
    value = _null(value)
    return int(value) if value.isdigit() else default


@dataclass(frozen=True, slots=True)
class ScontrolNode:
    """ScontrolNode is one ``scontrol -o show node`` record."""

    name: str
    state: str
    condition: NodeCondition
    gres: tuple[Gres, ...]
    cfg_tres: Tres
    alloc_tres: Tres
    cpus: int
    alloc_cpus: int
    real_memory_mib: int
    alloc_memory_mib: int
    partitions: tuple[str, ...]
    features: frozenset[str]
    reason: str
    raw: dict[str, str] = field(default_factory=dict)


def parse_show_node(text: str) -> list[ScontrolNode]:
    """parse_show_node reads ``scontrol -o show node`` output."""
    return [_node(record) for record in parse_records(text)]


def _node(record: dict[str, str]) -> ScontrolNode:
    """_node builds a ScontrolNode; a record without NodeName is garbage."""
    if not record.get("NodeName"):
        raise SlurmParseError(f"scontrol show node: record without NodeName: {list(record)[:5]}")
    state = record.get("State", "")
    return ScontrolNode(
        name=record["NodeName"],
        state=state,
        condition=node_condition(state),
        gres=parse_gres(_null(record.get("Gres"))),
        cfg_tres=parse_tres(_null(record.get("CfgTRES"))),
        alloc_tres=parse_tres(_null(record.get("AllocTRES"))),
        cpus=_int(record.get("CPUTot")),
        alloc_cpus=_int(record.get("CPUAlloc")),
        real_memory_mib=_int(record.get("RealMemory")),
        alloc_memory_mib=_int(record.get("AllocMem")),
        partitions=tuple(p for p in _null(record.get("Partitions")).split(",") if p),
        features=frozenset(f for f in _null(record.get("ActiveFeatures")).split(",") if f),
        reason=_null(record.get("Reason")),
        raw=record,
    )


@dataclass(frozen=True, slots=True)
class ScontrolJob:
    """ScontrolJob is one ``scontrol -o show job`` record."""

    job_id: int
    name: str
    state: str
    reason: str
    account: str
    qos: str
    partition: str
    nodes: tuple[str, ...]
    exit_code: int | None
    signal: int | None
    comment: str
    het_job_id: int | None
    het_job_offset: int | None
    reservation: str | None
    tres: Tres
    tres_per_node: tuple[Gres, ...]
    restarts: int
    raw: dict[str, str] = field(default_factory=dict)
    duplicated: frozenset[str] = frozenset()  # keys the line held twice: injected free text
    cluster: str = ""  # the cluster a multi-cluster site read it from ('' : the only one)

    @property
    def observed(self) -> Observed:
        """observed maps the job state and exit code to a metasched outcome."""
        return map_state(self.state, self.exit_code, self.signal)


def parse_show_job(text: str) -> list[ScontrolJob]:
    """parse_show_job reads ``scontrol -o show job`` output (first key wins; repeats kept in ``duplicated``)."""
    jobs, lines = [], record_lines(text)
    for line in lines:
        try:
            jobs.append(_job(parse_kv_line(line), duplicated_keys(line)))
        except SlurmParseError as error:  # a line a job name with a newline began: not a record of its own
            log.warning("skipping a scontrol job line: %s", error)
    if lines and not jobs:
        raise SlurmParseError(f"scontrol show job: none of {len(lines)} lines is a job: {lines[0][:200]!r}")
    return jobs


def _job(record: dict[str, str], duplicated: frozenset[str] = frozenset()) -> ScontrolJob:
    """_job builds a ScontrolJob; a record without a numeric JobId is garbage."""
    if not record.get("JobId", "").isdigit():
        raise SlurmParseError(f"scontrol show job: record without JobId: {list(record)[:5]}")
    code, signal = exit_pair(record.get("ExitCode", ""))
    het_id = _int(record.get("HetJobId")) or None
    return ScontrolJob(
        job_id=int(record["JobId"]),
        name=record.get("JobName", ""),
        state=record.get("JobState", ""),
        reason=_null(record.get("Reason")),
        account=_null(record.get("Account")),
        qos=_null(record.get("QOS")),
        partition=_null(record.get("Partition")),
        nodes=tuple(hostlist.expand(_null(record.get("NodeList")))),
        exit_code=code,
        signal=signal,
        comment=_null(record.get("Comment")),
        het_job_id=het_id,
        het_job_offset=_int(record.get("HetJobOffset")) if het_id else None,
        reservation=_null(record.get("Reservation")) or None,
        tres=parse_tres(_null(record.get("TRES"))),
        tres_per_node=parse_gres(_null(record.get("TresPerNode"))),
        restarts=_int(record.get("Restarts")),
        raw=record,
        duplicated=duplicated,
    )


@dataclass(frozen=True, slots=True)
class SlurmReservation:
    """SlurmReservation is one ``scontrol -o show reservation`` record."""

    name: str
    nodes: tuple[str, ...]
    start: datetime | None
    end: datetime | None
    duration: str
    flags: frozenset[str]
    users: tuple[str, ...]
    accounts: tuple[str, ...]
    state: str
    raw: dict[str, str] = field(default_factory=dict)


def parse_show_reservation(text: str) -> list[SlurmReservation]:
    """parse_show_reservation reads ``scontrol -o show reservation`` output."""
    return [_reservation(record) for record in parse_records(text)]


def _reservation(record: dict[str, str]) -> SlurmReservation:
    """_reservation builds a SlurmReservation; a record without ReservationName is garbage."""
    if not record.get("ReservationName"):
        raise SlurmParseError("scontrol show reservation: record without ReservationName")
    return SlurmReservation(
        name=record["ReservationName"],
        nodes=tuple(hostlist.expand(_null(record.get("Nodes")))),
        start=local_time(record.get("StartTime", "")),
        end=local_time(record.get("EndTime", "")),
        duration=_null(record.get("Duration")),
        flags=frozenset(f for f in _null(record.get("Flags")).split(",") if f),
        users=tuple(u for u in _null(record.get("Users")).split(",") if u),
        accounts=tuple(a for a in _null(record.get("Accounts")).split(",") if a),
        state=_null(record.get("State")),
        raw=record,
    )
