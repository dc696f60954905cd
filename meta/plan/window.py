"""The export window: ``--since``/``--until`` as a duration ago (``14d``, ``12h``, ``30m``) or an ISO date."""

from __future__ import annotations

import re
from datetime import datetime, timedelta

from meta.model.durations import parse_duration_s, parse_instant
from meta.model.errors import InvalidRequest

MAX_WINDOW_DAYS = 366  # a year of history; longer exports belong in several files
# an ISO date starts with a four-digit year and a dash; everything else is read as a duration ago
_ISO = re.compile(r"\s*[0-9]{4}-[0-9]{2}")


def moment(value: str, now: datetime, option: str) -> datetime:
    """moment reads an ISO 8601 time (naive = UTC) or a duration ago (``14d``) as an aware UTC time."""
    try:
        if _ISO.match(value):
            return parse_instant(value)
        return now - timedelta(seconds=parse_duration_s(value))
    except (ValueError, OverflowError) as exc:  # OverflowError: a duration past datetime's range
        raise InvalidRequest(f"{option} {value!r}: {exc} (give e.g. 14d, 12h, 30m or 2026-01-31)") from None


def parse_window(since: str, until: str | None, now: datetime) -> tuple[datetime, datetime]:
    """parse_window is [since, until) (until: now when not given); refuses an empty or over-long window."""
    start = moment(since, now, "--since")
    end = now if until is None else moment(until, now, "--until")
    if end <= start:
        raise InvalidRequest(f"--until ({end.isoformat()}) must be after --since ({start.isoformat()})")
    if end - start > timedelta(days=MAX_WINDOW_DAYS):
        raise InvalidRequest(f"the window is {(end - start).days} days: at most {MAX_WINDOW_DAYS} (export in parts)")
    return start, end
