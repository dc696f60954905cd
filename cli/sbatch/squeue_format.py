"""squeue's ``-o/--format`` for msqueue: ``%[.][width]<field>`` with the common fields.

``%.18i`` right-justifies the job id in 18 columns, ``%8j`` left-justifies the name in 8; a
value longer than its width is cut, as squeue does. Fields: ``%i`` job id, ``%j`` name, ``%u``
user, ``%a`` account, ``%P`` partition, ``%T`` state, ``%t`` compact state, ``%M`` run time,
``%l`` time limit, ``%D`` nodes, ``%R`` reason (waiting) or node list, ``%N`` node list, ``%V``
submit time, ``%%`` a percent sign. Anything else is refused with squeue's wording. squeue's
Cluster has no letter: only ``-O Cluster`` shows it (``cli.sbatch.squeue_long_format``).
"""

from __future__ import annotations

import re
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from slurm_bridge.hostlist import compress

DEFAULT_FORMAT = "%.18i %.9P %.8j %.8u %.2t %.10M %.6D %R"  # squeue's own default
_SPEC = re.compile(r"%(\.?)(\d*)([A-Za-z%])")
STATE_NAMES = {"PD": "PENDING", "R": "RUNNING", "CG": "COMPLETING", "CD": "COMPLETED", "F": "FAILED", "CA": "CANCELLED"}


def check_states(values: list[str]) -> list[str]:
    """check_states refuses a ``-t`` state squeue would refuse (FormatError with squeue's words)."""
    known = set(STATE_NAMES) | set(STATE_NAMES.values()) | {"ALL", "CANCELED"}
    for value in values:
        if value.upper() not in known:
            raise FormatError(f"Invalid job state specified: {value}")
    return values


class FormatError(ValueError):
    """FormatError is a ``-o`` format msqueue does not know."""


def duration(seconds: int) -> str:
    """duration is squeue's ``[days-][hours:]minutes:seconds`` (``0:00``, ``1:05:00``, ``2-00:00:00``)."""
    days, rest = divmod(max(int(seconds), 0), 86400)
    hours, rest = divmod(rest, 3600)
    minutes, secs = divmod(rest, 60)
    if days:
        return f"{days}-{hours:02d}:{minutes:02d}:{secs:02d}"
    if hours:
        return f"{hours}:{minutes:02d}:{secs:02d}"
    return f"{minutes}:{secs:02d}"


def _time_limit(row: Mapping[str, Any]) -> str:
    return duration(row["time_limit_s"]) if row["time_limit_s"] else "UNLIMITED"


def _nodelist(row: Mapping[str, Any]) -> str:
    return compress(row["nodelist"]) if row["nodelist"] else ""


def _reason_or_nodes(row: Mapping[str, Any]) -> str:
    return f"({row['reason']})" if row["st"] == "PD" or not row["nodelist"] else _nodelist(row)


def _submitted(row: Mapping[str, Any]) -> str:
    return datetime.fromisoformat(row["submitted_at"]).strftime("%Y-%m-%dT%H:%M:%S")


def _array_task(row: Mapping[str, Any]) -> str:
    """_array_task is squeue's %K: an element's index (``2-7%2`` for waiting ones), N/A outside arrays."""
    if not row.get("array_job_id"):
        return "N/A"
    return row["job_id"].removeprefix(f"{row['array_job_id']}_").strip("[]")


FIELDS: dict[str, tuple[str, Callable[[Mapping[str, Any]], str]]] = {
    "i": ("JOBID", lambda r: r["job_id"]),
    "j": ("NAME", lambda r: r["name"]),
    "u": ("USER", lambda r: r["user"]),
    "a": ("ACCOUNT", lambda r: r["account"]),
    "P": ("PARTITION", lambda r: r["partition"] or ""),
    "T": ("STATE", lambda r: STATE_NAMES.get(r["st"], r["st"])),
    "t": ("ST", lambda r: r["st"]),
    "M": ("TIME", lambda r: duration(r["run_time_s"])),
    "l": ("TIME_LIMIT", _time_limit),
    "D": ("NODES", lambda r: str(r["nodes"])),
    "R": ("NODELIST(REASON)", _reason_or_nodes),
    "N": ("NODELIST", _nodelist),
    "V": ("SUBMIT_TIME", _submitted),
    "F": ("ARRAY_JOB_ID", lambda r: r.get("array_job_id") or r["job_id"]),
    "K": ("ARRAY_TASK_ID", _array_task),
}
# fields squeue has in -O only (no %-letter): keyed by their -O name
LONG_ONLY: dict[str, tuple[str, Callable[[Mapping[str, Any]], str]]] = {
    "cluster": ("CLUSTER", lambda r: r.get("cluster") or ""),
}
COLUMNS = {**FIELDS, **LONG_ONLY}


@dataclass(frozen=True)
class Part:
    """Part is literal text or one field with its justification and width."""

    text: str = ""
    field: str = ""
    right: bool = False
    width: int | None = None

    def render(self, value: str) -> str:
        """render cuts and pads ``value`` to the part's width."""
        if self.width is None:
            return value
        value = value[: self.width]
        return value.rjust(self.width) if self.right else value.ljust(self.width)


def parse_format(text: str) -> list[Part]:
    """parse_format splits an ``-o`` format into literal text and fields (FormatError on an unknown field)."""
    parts: list[Part] = []
    at = 0
    for match in _SPEC.finditer(text):
        if match.start() > at:
            parts.append(Part(text=text[at : match.start()]))
        dot, width, letter = match.groups()
        if letter == "%":
            parts.append(Part(text="%"))
        elif letter not in FIELDS:
            raise FormatError(f"Invalid job format specification: %{letter} (msqueue knows %{' %'.join(FIELDS)})")
        else:
            parts.append(Part(field=letter, right=bool(dot), width=int(width) if width else None))
        at = match.end()
    if at < len(text):
        parts.append(Part(text=text[at:]))
    return parts


def render_line(parts: list[Part], row: Mapping[str, Any] | None) -> str:
    """render_line is one output line: the header when ``row`` is None."""
    out = []
    for part in parts:
        if not part.field:
            out.append(part.text)
            continue
        header, value = COLUMNS[part.field]
        out.append(part.render(header if row is None else value(row)))
    return "".join(out).rstrip()
