"""Parse ``sacct -n -P -X -o <fields>`` text (22.05's ``sacct --json`` loses exit codes)."""

from __future__ import annotations

import logging
import re
from collections.abc import Sequence
from dataclasses import dataclass
from datetime import datetime

from slurm_bridge import hostlist
from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.tres import Tres, parse_tres
from slurm_bridge.parse.unforged import unforged_rows
from slurm_bridge.parse.values import elapsed_seconds, exit_pair, local_time
from slurm_bridge.parse.values import number as int_value
from slurm_bridge.states import Observed, base_state, map_state
from slurm_bridge.tags import AttemptTag, parse_tag

log = logging.getLogger(__name__)

SACCT_FIELDS: tuple[str, ...] = (
    "JobID",
    "JobName",
    "Comment",
    "State",
    "ExitCode",
    "Reservation",
    "AllocTRES",
    "NodeList",
    "Account",
    "Start",
    "End",
    "Elapsed",
    "DerivedExitCode",
    "UID",
)
# Fields added to SACCT_FIELDS after fixtures were captured: a line may lack them at its end.
_LATE_FIELDS = frozenset({"DerivedExitCode", "UID"})
# "123", "123+1" (het component), "123_4" / "123_[1-3%2]" (array), each optionally ".batch"/".0".
_JOB_ID = re.compile(
    r"^(?P<job>\d+)(?:\+(?P<het>\d+)|_(?P<task>\d+)|_\[(?P<tasks>[^\]]*)\])?(?:\.(?P<step>[\w-]+))?$"
)


@dataclass(frozen=True, slots=True)
class SacctJob:
    """SacctJob is one accounting record: a job allocation, het component, array task or step."""

    job_id: str
    base_job_id: int
    het_offset: int | None
    array_task_id: int | None
    step: str | None
    name: str
    comment: str
    state: str
    state_by_uid: int | None
    exit_code: int | None
    signal: int | None
    reservation: str | None
    alloc_tres: Tres
    nodes: tuple[str, ...]
    account: str = ""
    start: datetime | None = None
    end: datetime | None = None
    elapsed_s: int | None = None
    uid: int | None = None  # the uid the job ran as (None: not read, e.g. older captures)
    cluster: str = ""  # the cluster a multi-cluster site read it from ('' : the only one)

    @property
    def observed(self) -> Observed:
        """observed maps state and exit code to a metasched outcome."""
        return map_state(self.state, self.exit_code, self.signal)

    @property
    def tag(self) -> AttemptTag | None:
        """tag is the metasched attempt of this record, if any."""
        return parse_tag(self.name, self.comment)


def parse_sacct(
    text: str, fields: Sequence[str] = SACCT_FIELDS, *, delimiter: str = "|", strict: bool = True
) -> list[SacctJob]:
    """parse_sacct reads ``-P`` output; a header line (output without ``-n``) is detected and used."""
    lines = [line for line in text.splitlines() if line.strip()]
    if lines and lines[0].split(delimiter)[0] == "JobID":
        fields, lines = tuple(lines[0].split(delimiter)), lines[1:]
    records = []
    for number, line in enumerate(lines, 1):
        try:
            records.append(_record(dict(zip(fields, _split(line, fields, delimiter), strict=True))))
        except SlurmParseError as error:
            if strict:
                raise SlurmParseError(f"sacct line {number}: {error}: {line[:200]!r}") from error
            log.warning("skipping unparseable sacct line %d: %s", number, error)
    return records


def parse_sacct_ids(text: str) -> set[str]:
    """parse_sacct_ids reads ``sacct -n -P -X -o JobID`` output: the job ids alone, which no job name can forge."""
    ids = (line.split("|")[0].strip() for line in text.splitlines())
    return {job_id for job_id in ids if _JOB_ID.match(job_id)}


def unforged_records(records: list[SacctJob], ids: set[str]) -> list[SacctJob]:
    """unforged_records drops the ``-P`` rows a job name forged (``slurm_bridge.parse.unforged``)."""
    return unforged_rows(records, ids, lambda record: record.job_id, "sacct")


def _split(line: str, fields: Sequence[str], delimiter: str) -> list[str]:
    """_split splits one line; extra delimiters are given back to the free-text Comment field."""
    parts = line.split(delimiter)
    while len(parts) < len(fields) and fields[len(parts)] in _LATE_FIELDS:
        parts.append("")
    extra = len(parts) - len(fields)
    if extra > 0 and "Comment" in fields:
        at = list(fields).index("Comment")
        parts[at : at + extra + 1] = [delimiter.join(parts[at : at + extra + 1])]
    if len(parts) != len(fields):
        raise SlurmParseError(f"expected {len(fields)} fields, got {len(parts)}")
    return parts


def _state_by(state: str) -> int | None:
    """_state_by reads the uid in ``CANCELLED by 0``."""
    match = re.search(r"\bby (\d+)", state)
    return int(match.group(1)) if match else None


def _shell_exit_code(code: int | None, step_signal: int | None) -> int | None:
    """_shell_exit_code undoes sacct's display of exit codes above 128 where a step tells which.

    sacct prints an exit code of 128+N as ``N:0`` (squeue's raw status keeps 128+N). When a step
    of the job was killed by signal N (DerivedExitCode ``0:N``), the batch script exited 128+N
    because of it (srun, or a shell waiting on the killed task), so 128+N is what it was.
    """
    if code is not None and step_signal is not None and code == step_signal:
        return 128 + code
    return code


def _record(row: dict[str, str]) -> SacctJob:
    """_record builds a SacctJob from one row of named fields."""
    job_id = row.get("JobID", "")
    match = _JOB_ID.match(job_id)
    if not match:
        raise SlurmParseError(f"bad JobID {job_id!r}")
    code, signal = exit_pair(row.get("ExitCode", ""))
    code = _shell_exit_code(code, exit_pair(row.get("DerivedExitCode", ""))[1])
    state = row.get("State", "")
    return SacctJob(
        job_id=job_id,
        base_job_id=int(match.group("job")),
        het_offset=int(match.group("het")) if match.group("het") else None,
        array_task_id=int(match.group("task")) if match.group("task") else None,
        step=match.group("step"),
        name=row.get("JobName", ""),
        comment=row.get("Comment", ""),
        state=base_state(state),
        state_by_uid=_state_by(state),
        exit_code=code,
        signal=signal,
        reservation=row.get("Reservation") or None,
        alloc_tres=parse_tres(row.get("AllocTRES")),
        nodes=hostlist.expand_cached(row.get("NodeList", "")),
        account=row.get("Account", ""),
        start=local_time(row.get("Start", "")),
        end=local_time(row.get("End", "")),
        elapsed_s=elapsed_seconds(row.get("Elapsed", "")),
        uid=int_value(row.get("UID", "")),
    )
