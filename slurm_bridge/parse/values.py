"""Small value parsers shared by the Slurm output parsers: numbers, times, exit codes."""

from __future__ import annotations

import re
from datetime import UTC, datetime
from typing import Any

from slurm_bridge.errors import SlurmParseError

_UNSET_TIMES = {"", "Unknown", "None", "NONE", "N/A", "(null)", "0"}  # NONE: squeue's EndTime of a job without a time limit
_ELAPSED = re.compile(r"^(?:(\d+)-)?(?:(\d+):)?(\d+):(\d+)(?:\.\d+)?$")


def number(value: Any, default: int | None = None) -> int | None:
    """number reads an int from openapi v0.0.38 (plain) or later (``{"set", "number"}``) shapes."""
    if isinstance(value, dict):
        if value.get("infinite"):
            return None
        if not value.get("set", True):
            return default
        value = value.get("number")
    if value is None or isinstance(value, bool):
        return default
    if isinstance(value, int | float):
        return int(value)
    if isinstance(value, str) and value.strip().lstrip("-").isdigit():
        return int(value)
    return default


def text(value: Any) -> str:
    """text reads a string, mapping None and Slurm's ``(null)`` to ""."""
    if value is None:
        return ""
    if isinstance(value, list):
        return ",".join(str(v) for v in value)
    value = str(value)
    return "" if value == "(null)" else value


def epoch(value: Any) -> datetime | None:
    """epoch turns a Unix time (0 = unset) into an aware UTC datetime."""
    seconds = number(value)
    if not seconds or seconds < 0:
        return None
    return datetime.fromtimestamp(seconds, tz=UTC)


def local_time(value: str) -> datetime | None:
    """local_time parses Slurm's ``2026-12-02T11:52:56`` (local time) into an aware datetime."""
    value = value.strip()
    if value in _UNSET_TIMES:
        return None
    try:
        return datetime.fromisoformat(value).astimezone()
    except ValueError as error:
        raise SlurmParseError(f"bad Slurm time {value!r}") from error


def elapsed_seconds(value: str) -> int | None:
    """elapsed_seconds parses ``[D-]HH:MM:SS`` or ``MM:SS`` into seconds."""
    value = value.strip()
    if value in _UNSET_TIMES or value in ("INVALID", "UNLIMITED"):
        return None
    match = _ELAPSED.match(value)
    if not match:
        raise SlurmParseError(f"bad elapsed time {value!r}")
    days, hours, minutes, seconds = (int(g) if g else 0 for g in match.groups())
    return ((days * 24 + hours) * 60 + minutes) * 60 + seconds


def wait_status(status: int) -> tuple[int | None, int | None]:
    """wait_status decodes a raw wait status (squeue's exit_code) into (exit code, signal)."""
    signal = status & 0x7F
    if signal:
        return None, signal
    return (status >> 8) & 0xFF, None


def exit_pair(value: str) -> tuple[int | None, int | None]:
    """exit_pair parses sacct/scontrol ``3:0`` (exit code : signal) into (exit code, signal)."""
    value = value.strip()
    if not value:
        return None, None
    code, _, signal = value.partition(":")
    if not code.isdigit() or (signal and not signal.isdigit()):
        raise SlurmParseError(f"bad exit code {value!r}")
    signal_number = int(signal) if signal else 0
    return int(code), signal_number or None
