"""Parse squeue: ``--Format`` text (what the daemon reads) and ``--json`` (openapi v0.0.38 on 22.05).

The daemon reads the text form. 22.05's ``--json`` ignores every filter and renders every job
slurmctld still holds (ended ones too, for ``MinJobAge``): with 3,400 jobs in memory it took
0.39 s and 15 MB per call against 0.03 s for the same jobs as ``--Format`` fields. The JSON
parser stays for captured documents and as the reference the text parser is tested against.
"""

from __future__ import annotations

import json
import logging
from collections.abc import Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from slurm_bridge import hostlist
from slurm_bridge.errors import SlurmParseError, SlurmTransient
from slurm_bridge.parse.tres import Gres, Tres, parse_gres, parse_tres
from slurm_bridge.parse.unforged import unforged_rows
from slurm_bridge.parse.values import epoch, local_time, number, text, wait_status
from slurm_bridge.states import Observed, base_state, map_state
from slurm_bridge.tags import AttemptTag, parse_tag


@dataclass(frozen=True, slots=True)
class SqueueJob:
    """SqueueJob is one job (or het-job component) as squeue reports it."""

    job_id: int
    name: str
    comment: str
    state: str
    account: str
    qos: str
    partition: str
    nodelist: str
    nodes: tuple[str, ...]
    tres_alloc: Tres
    tres_per_node: tuple[Gres, ...]
    gres_detail: tuple[Gres, ...]
    raw_exit_status: int | None
    exit_code: int | None
    signal: int | None
    het_job_id: int | None
    het_job_offset: int | None
    array_job_id: int | None
    array_task_id: int | None
    reservation: str | None
    state_reason: str
    restart_count: int
    submit_time: datetime | None
    start_time: datetime | None
    end_time: datetime | None
    user_name: str = ""
    priority: int | None = None
    user_id: int | None = None  # the uid the job runs as (None: not read, e.g. older captures)
    cluster: str = ""  # the cluster a multi-cluster site read it from ('' : the only one)

    @property
    def observed(self) -> Observed:
        """observed maps the job state and exit status to a metasched outcome."""
        return map_state(self.state, self.exit_code, self.signal)

    @property
    def tag(self) -> AttemptTag | None:
        """tag is the metasched attempt this job belongs to, if any."""
        return parse_tag(self.name, self.comment)


def parse_squeue_entries(payload: str | bytes) -> list[dict[str, Any]]:
    """parse_squeue_entries is the raw ``jobs`` list of ``squeue --json`` (adoption reads fields SqueueJob lacks)."""
    return _jobs_list(_load(payload, "squeue --json"))


def parse_squeue_json(payload: str | bytes) -> list[SqueueJob]:
    """parse_squeue_json reads the ``jobs`` list of ``squeue --json`` output."""
    jobs = _jobs_list(_load(payload, "squeue --json"))
    return [_job(entry) for entry in jobs]


log = logging.getLogger("metasched.slurm")

# ``squeue --Format`` field names (22.05), in the order parse_squeue_text reads them. Each field
# ends with the unit separator (0x1f): job names and comments may hold '|', ',' or spaces.
SQUEUE_FIELDS = (
    "JobID", "Name", "Comment", "State", "Account", "QOS", "Partition", "NodeList", "tres-alloc",
    "tres-per-node", "Exit_Code", "HetJobID", "HetJobOffset", "ArrayJobID", "ArrayTaskID",
    "Reservation", "Reason", "RestartCnt", "SubmitTime", "StartTime", "EndTime", "UserName",
    "PriorityLong", "UserId",
)  # fmt: skip
FIELD_END = "\x1f"
# Fields added after output was captured: a line may lack them at its end (read as empty).
_LATE_FIELDS = frozenset({"UserId"})


def squeue_format_args() -> list[str]:
    """squeue_format_args asks for every job slurmctld holds (ended ones too) as SQUEUE_FIELDS."""
    return ["--noheader", "--states=all", "--Format=" + ",".join(f"{name}:{FIELD_END}" for name in SQUEUE_FIELDS)]


def parse_squeue_text(payload: str) -> list[SqueueJob]:
    """parse_squeue_text reads ``squeue --Format`` output in SQUEUE_FIELDS order.

    A line that does not parse is logged and skipped: one odd foreign job must not blind the
    reconciler (an attempt squeue misses is looked up in sacct). Output of which no line parses
    is not an empty queue but something else entirely, and raises.
    """
    jobs = []
    lines = [line for line in payload.splitlines() if line.strip()]
    for line_no, line in enumerate(lines, 1):
        parts = line.split(FIELD_END)
        if parts[-1].strip() == "":
            parts.pop()
        while len(parts) < len(SQUEUE_FIELDS) and SQUEUE_FIELDS[len(parts)] in _LATE_FIELDS:
            parts.append("")
        try:
            if len(parts) != len(SQUEUE_FIELDS):
                raise SlurmParseError(f"expected {len(SQUEUE_FIELDS)} fields, got {len(parts)}")
            jobs.append(_text_job(dict(zip(SQUEUE_FIELDS, parts, strict=True))))
        except SlurmParseError as error:
            log.warning("skipping unparseable squeue line %d: %s: %r", line_no, error, line[:200])
    if lines and not jobs:
        raise SlurmParseError(f"squeue: none of {len(lines)} lines is a job: {lines[0][:200]!r}")
    return jobs


def _text_job(row: dict[str, str]) -> SqueueJob:
    """_text_job builds one SqueueJob from named ``--Format`` fields (gres_detail is JSON-only)."""
    job_id = number(row["JobID"])
    if job_id is None:
        raise SlurmParseError(f"bad JobID {row['JobID']!r}")
    raw = number(row["Exit_Code"])
    code, signal = wait_status(raw) if raw is not None else (None, None)
    het_id = number(row["HetJobID"])
    array_task = number(row["ArrayTaskID"])
    nodelist = text(row["NodeList"])
    return SqueueJob(
        job_id=job_id,
        name=text(row["Name"]),
        comment=text(row["Comment"]),
        state=_state(row["State"]),
        account=text(row["Account"]),
        qos=text(row["QOS"]),
        partition=text(row["Partition"]),
        nodelist=nodelist,
        nodes=hostlist.expand_cached(nodelist),
        tres_alloc=parse_tres(text(row["tres-alloc"])),
        tres_per_node=parse_gres(text(row["tres-per-node"])),
        gres_detail=(),
        raw_exit_status=raw,
        exit_code=code,
        signal=signal,
        het_job_id=het_id,
        het_job_offset=number(row["HetJobOffset"]) if het_id else None,
        # squeue prints a job's own id as ArrayJobID when it is not part of an array
        array_job_id=number(row["ArrayJobID"]) if array_task is not None else None,
        array_task_id=array_task,
        reservation=text(row["Reservation"]) or None,
        state_reason=text(row["Reason"]),
        restart_count=number(row["RestartCnt"], 0) or 0,
        submit_time=local_time(row["SubmitTime"]),
        start_time=local_time(row["StartTime"]),
        end_time=local_time(row["EndTime"]),
        user_name=text(row["UserName"]),
        priority=number(row["PriorityLong"]),
        user_id=number(row["UserId"]),
    )


def job_ids_args() -> list[str]:
    """job_ids_args asks for the id of every job slurmctld holds, alone: a column no job name can shift."""
    return ["--noheader", "--states=all", f"--Format=JobID:{FIELD_END}"]


def parse_job_ids(payload: str) -> set[int]:
    """parse_job_ids reads ``job_ids_args`` output (lines that are not a number are ignored)."""
    ids = (line.split(FIELD_END)[0].strip() for line in payload.splitlines())
    return {int(job_id) for job_id in ids if job_id.isdigit()}


def unforged(jobs: list[SqueueJob], ids: set[int]) -> list[SqueueJob]:
    """unforged drops the rows a job name forged (``slurm_bridge.parse.unforged``); an attempt whose
    row is dropped is looked up in sacct like any attempt squeue misses."""
    return unforged_rows(jobs, ids, lambda job: job.job_id, "squeue")


def metasched_jobs(jobs: Iterable[SqueueJob], site: str | None = None) -> list[SqueueJob]:
    """metasched_jobs keeps metasched-tagged jobs (squeue cannot filter); with ``site``, not another site's."""
    return [job for job in jobs if job.tag is not None and (site is None or not job.tag.other_site(site))]


def _load(payload: str | bytes, what: str) -> dict[str, Any]:
    """_load decodes JSON and checks it is an object."""
    try:
        document = json.loads(payload)
    except (json.JSONDecodeError, UnicodeDecodeError) as error:
        raise SlurmParseError(f"{what}: not JSON ({error})") from error
    if not isinstance(document, dict):
        raise SlurmParseError(f"{what}: expected a JSON object, got {type(document).__name__}")
    return document


def api_errors(document: dict[str, Any], what: str) -> None:
    """api_errors raises when Slurm put errors in the document.

    With the controller unreachable, 22.05's ``squeue --json`` and ``sinfo --json`` exit 0 with
    an empty list and ``errors: [{"error": "Unspecified error", ...}]``. Taking that list at face
    value would make every job look gone, so it is a transient failure, never an empty answer.
    """
    errors = document.get("errors")
    if errors:
        raise SlurmTransient(f"{what} reported errors: {json.dumps(errors)[:300]}", command=what.split()[0])


def _jobs_list(document: dict[str, Any]) -> list[dict[str, Any]]:
    """_jobs_list returns ``jobs`` or raises with the API errors Slurm put in the document."""
    api_errors(document, "squeue --json")
    jobs = document.get("jobs")
    if not isinstance(jobs, list):
        errors = document.get("errors") or "no 'jobs' list"
        raise SlurmParseError(f"squeue --json: {errors}")
    if not all(isinstance(entry, dict) for entry in jobs):
        raise SlurmParseError("squeue --json: 'jobs' entries must be objects")
    return jobs


def _exit_status(value: Any) -> tuple[int | None, int | None, int | None]:
    """_exit_status reads a raw wait status (v0.0.38) or a later ``{return_code, signal}`` object."""
    if isinstance(value, dict) and ("return_code" in value or "signal" in value):
        signal = number(
            (value.get("signal") or {}).get("id") if isinstance(value.get("signal"), dict) else None
        )
        return None, number(value.get("return_code")), signal or None
    raw = number(value)
    if raw is None:
        return None, None, None
    code, signal = wait_status(raw)
    return raw, code, signal


def _optional_id(value: Any) -> int | None:
    """_optional_id reads an id where 0 (or unset) means "none"."""
    result = number(value)
    return result or None


def _state(value: Any) -> str:
    """_state reads ``"RUNNING"`` (v0.0.38) or ``["RUNNING", ...]`` (later) as the base state."""
    return base_state(text(value[0] if isinstance(value, list) and value else value))


def _job(entry: dict[str, Any]) -> SqueueJob:
    """_job builds one SqueueJob; a job without an id is garbage."""
    job_id = number(entry.get("job_id"))
    if job_id is None:
        raise SlurmParseError(f"squeue --json: job without job_id: {str(entry)[:200]}")
    raw, code, signal = _exit_status(entry.get("exit_code"))
    het_id = _optional_id(entry.get("het_job_id"))
    nodelist = text(entry.get("nodes"))
    return SqueueJob(
        job_id=job_id,
        name=text(entry.get("name")),
        comment=text(entry.get("comment")),
        state=_state(entry.get("job_state")),
        account=text(entry.get("account")),
        qos=text(entry.get("qos")),
        partition=text(entry.get("partition")),
        nodelist=nodelist,
        nodes=hostlist.expand_cached(nodelist),
        tres_alloc=parse_tres(text(entry.get("tres_alloc_str"))),
        tres_per_node=parse_gres(text(entry.get("tres_per_node"))),
        gres_detail=tuple(g for item in entry.get("gres_detail") or () for g in parse_gres(text(item))),
        raw_exit_status=raw,
        exit_code=code,
        signal=signal,
        het_job_id=het_id,
        het_job_offset=number(entry.get("het_job_offset")) if het_id else None,
        array_job_id=_optional_id(entry.get("array_job_id")),
        array_task_id=number(entry.get("array_task_id")),
        reservation=text(entry.get("resv_name")) or None,
        state_reason=text(entry.get("state_reason")),
        restart_count=number(entry.get("restart_cnt"), 0) or 0,
        submit_time=epoch(entry.get("submit_time")),
        start_time=epoch(entry.get("start_time")),
        end_time=epoch(entry.get("end_time")),
        user_name=text(entry.get("user_name")),
        priority=number(entry.get("priority")),
        user_id=number(entry.get("user_id")),
    )
