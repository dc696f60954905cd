"""Durations and instants as users write them: ``90``, ``30m``, ``4h``, ``1-12:00:00``, ISO dates."""

from __future__ import annotations

import math
import re
from datetime import UTC, datetime
from typing import Any

_UNIT_SECONDS = {"s": 1, "sec": 1, "m": 60, "min": 60, "h": 3600, "hr": 3600, "d": 86400, "day": 86400}
# ASCII digits and fullmatch: ``\d`` takes any Unicode digit and ``$`` matches before a newline
_UNITS = re.compile(r"\s*([0-9]+(?:\.[0-9]+)?)\s*(s|sec|m|min|h|hr|d|day)?\s*", re.IGNORECASE)
# Slurm's time formats: minutes, MM:SS, HH:MM:SS, D-HH, D-HH:MM, D-HH:MM:SS
_SLURM = re.compile(r"(?:([0-9]{1,9})-)?([0-9]{1,9})(?::([0-9]{1,9}))?(?::([0-9]{1,9}))?")


def parse_duration_s(value: Any) -> float:
    """parse_duration_s turns ``90`` (seconds), ``30m``, ``4h``, ``2d`` or ``1-12:00:00`` into seconds."""
    if isinstance(value, bool):
        raise ValueError("a duration must be a number of seconds or a string such as 30m or 4h")
    if isinstance(value, int | float):
        if not math.isfinite(value):
            raise ValueError("a duration must be finite (there is no unlimited time limit)")
        if value < 0:
            raise ValueError("a duration must not be negative")
        return float(value)
    if not isinstance(value, str) or not value.strip():
        raise ValueError("a duration must be a number of seconds or a string such as 30m or 4h")
    match = _UNITS.fullmatch(value)
    if match:
        seconds = float(match.group(1)) * _UNIT_SECONDS[(match.group(2) or "s").lower()]
        if not math.isfinite(seconds):
            raise ValueError(f"duration {value!r} is too large")
        return seconds
    if ":" in value or "-" in value:
        return parse_slurm_time_s(value)
    raise ValueError(f"cannot parse duration {value!r} (use e.g. 90, 30m, 4h, 2d or 1-12:00:00)")


def parse_slurm_time_s(value: str) -> float:
    """parse_slurm_time_s reads sbatch's ``--time`` formats (a bare number is minutes)."""
    text = value.strip()
    if text.lower() in {"infinite", "unlimited"}:
        raise ValueError("an unlimited time limit is not accepted; give a bound such as 4:00:00")
    match = _SLURM.fullmatch(text)
    if not match:
        raise ValueError(f"cannot parse Slurm time {value!r} (use M, M:S, H:M:S, D-H, D-H:M or D-H:M:S)")
    days, first, second, third = match.groups()
    parts = [int(p) for p in (first, second, third) if p is not None]
    day_seconds = int(days) * 86400 if days else 0
    if days:
        hours, minutes, seconds = (parts + [0, 0])[:3]
        return float(day_seconds + hours * 3600 + minutes * 60 + seconds)
    if len(parts) == 1:
        return float(parts[0] * 60)
    if len(parts) == 2:
        return float(parts[0] * 60 + parts[1])
    return float(parts[0] * 3600 + parts[1] * 60 + parts[2])


def format_slurm_time(seconds: float) -> str:
    """format_slurm_time renders seconds as Slurm's ``D-HH:MM:SS`` (rounded up to a minute)."""
    total = int(-(-seconds // 60) * 60)
    days, rest = divmod(total, 86400)
    hours, rest = divmod(rest, 3600)
    minutes = rest // 60
    return f"{days}-{hours:02d}:{minutes:02d}:00" if days else f"{hours:02d}:{minutes:02d}:00"


def parse_instant(value: Any) -> datetime:
    """parse_instant reads an ISO-8601 time (naive means UTC) or a datetime into an aware UTC time."""
    if isinstance(value, datetime):
        moment = value
    elif isinstance(value, str):
        try:
            moment = datetime.fromisoformat(value.strip().replace("Z", "+00:00"))
        except ValueError as exc:
            raise ValueError(f"cannot parse time {value!r} (use ISO 8601, e.g. 2026-12-03T18:00:00Z)") from exc
    else:
        raise ValueError("a time must be an ISO 8601 string such as 2026-12-03T18:00:00Z")
    return moment.replace(tzinfo=UTC) if moment.tzinfo is None else moment.astimezone(UTC)


def utcnow() -> datetime:
    """utcnow is the current time as an aware UTC datetime."""
    return datetime.now(UTC)
