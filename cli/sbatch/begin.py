"""begin reads ``--begin`` as sbatch does (Slurm's ``parse_time``) into an absolute UTC instant.

Accepted, in the submitting host's local time zone (``TZ``), pieces in any order separated by
blanks, ``-`` or ``T`` as Slurm reads them:

- ``now[+|-COUNT[seconds|minutes|hours|days|weeks]]`` (seconds by default; singular units too);
- ``today``, ``tomorrow`` (midnight of that day); ``midnight``, ``noon``, ``elevenses`` (11:00),
  ``fika`` (15:00), ``teatime`` (16:00);
- ``HH:MM[:SS]`` with an optional ``AM``/``PM``;
- ``YYYY-MM-DD``, ``MMDD[YY]``, ``MM/DD[/YY]``, ``MM.DD[.YY]``;
- ``uts<epoch seconds>``.

As in Slurm: a time without a date is the next such time (today if it is still ahead, by at least
a minute, else tomorrow); a date without a year is this year if still ahead, else next year; a
date without a time is its midnight. metasched stores the instant, so a job's begin time does not
move if the daemon's time zone differs from the submitter's.
"""

from __future__ import annotations

import re
from datetime import UTC, date, datetime, time, timedelta, tzinfo

_UNITS = {"second": 1, "minute": 60, "hour": 3600, "day": 86400, "week": 7 * 86400}
_NAMED = {"midnight": (0, 0), "noon": (12, 0), "elevenses": (11, 0), "fika": (15, 0), "teatime": (16, 0)}
_NOW = re.compile(r"now\s*(?:(?P<sign>[+-])\s*(?P<count>[0-9]{1,9})\s*(?P<unit>[a-z]*))?", re.ASCII)
_CLOCK = re.compile(r"(?P<h>[0-9]{1,2}):(?P<m>[0-9]{2})(?::(?P<s>[0-9]{2}))?\s*(?P<ampm>am|pm)?", re.ASCII)
_ISO_DATE = re.compile(r"(?P<y>[0-9]{4})-(?P<mo>[0-9]{1,2})-(?P<d>[0-9]{1,2})", re.ASCII)
_US_DATE = re.compile(r"(?P<mo>[0-9]{1,2})[./]?(?P<d>[0-9]{2}|(?<=[./])[0-9])(?:[./]?(?P<y>[0-9]{2}))?", re.ASCII)
_MAX_AHEAD = timedelta(days=365)  # like every other duration: a year at most


class BeginError(ValueError):
    """BeginError is a ``--begin`` value sbatch would refuse (``Invalid time specification``)."""


def _delta(sign: str | None, count: str | None, unit: str | None) -> timedelta:
    if sign is None:
        return timedelta()
    name = (unit or "seconds").removesuffix("s")
    if name not in _UNITS:
        raise BeginError(f"unknown unit {unit!r} (use seconds, minutes, hours, days or weeks)")
    seconds = int(count or 0) * _UNITS[name]
    if seconds > _MAX_AHEAD.total_seconds():  # checked before timedelta, which overflows near 10**14 s
        raise BeginError("the begin time is more than a year away")
    return timedelta(seconds=-seconds if sign == "-" else seconds)


def _clock(match: re.Match[str]) -> time:
    hour, minute, second = int(match["h"]), int(match["m"]), int(match["s"] or 0)
    if match["ampm"] == "pm" and hour < 12:
        hour += 12
    elif match["ampm"] == "am" and hour == 12:
        hour = 0
    if hour > 23 or minute > 59 or second > 59:
        raise BeginError(f"bad time of day {match.group(0)!r}")
    return time(hour, minute, second)


def _date(year: int | None, month: int, day: int) -> tuple[int | None, int, int]:
    if not 1 <= month <= 12 or not 1 <= day <= 31:
        raise BeginError(f"bad date {month:02d}/{day:02d}")
    return year, month, day


def parse_begin(text: str, now: datetime, zone: tzinfo | None = None) -> datetime:
    """parse_begin is the UTC instant ``--begin=text`` means at ``now`` (an aware time) in ``zone`` (default: local)."""
    local_now = now.astimezone(zone) if zone is not None else now.astimezone()
    source = text.strip().lower()
    if not source:
        raise BeginError("empty time")
    if source.startswith("uts"):
        if not (source[3:].isascii() and source[3:].isdigit()) or not 1_000_000 <= int(source[3:]) < 10**11:
            raise BeginError("uts needs seconds since the epoch")
        return _bounded(datetime.fromtimestamp(int(source[3:]), UTC), now)
    day: tuple[int | None, int, int] | None = None
    clock: time | None = None
    moment: datetime | None = None
    pos = 0
    while pos < len(source):
        if source[pos] in " \t-t" and not source.startswith(("today", "tomorrow", "teatime"), pos):
            pos += 1
            continue
        rest = source[pos:]
        if rest.startswith("today"):
            day, pos = (local_now.year, local_now.month, local_now.day), pos + 5
        elif rest.startswith("tomorrow"):
            later = local_now + timedelta(days=1)
            day, pos = (later.year, later.month, later.day), pos + 8
        elif name := next((n for n in _NAMED if rest.startswith(n)), None):
            clock, pos = time(*_NAMED[name]), pos + len(name)
        elif (found := _NOW.match(rest)) is not None:
            moment, pos = local_now + _delta(found["sign"], found["count"], found["unit"]), pos + found.end()
        elif (found := _CLOCK.match(rest)) is not None:
            clock, pos = _clock(found), pos + found.end()
        elif (found := _ISO_DATE.match(rest)) is not None:
            day, pos = _date(int(found["y"]), int(found["mo"]), int(found["d"])), pos + found.end()
        elif (found := _US_DATE.match(rest)) is not None:
            year = 2000 + int(found["y"]) if found["y"] else None
            day, pos = _date(year, int(found["mo"]), int(found["d"])), pos + found.end()
        else:
            raise BeginError(f"cannot read {rest[:40]!r}")
    if moment is not None:
        return _bounded(moment.replace(microsecond=0).astimezone(UTC), now)
    return _bounded(_resolve(day, clock, local_now).astimezone(UTC), now)


def _resolve(day: tuple[int | None, int, int] | None, clock: time | None, local_now: datetime) -> datetime:
    """_resolve fills in what was left out as Slurm does (the soonest day, this year or the next)."""
    zone = local_now.tzinfo
    if day is None and clock is None:
        raise BeginError("no date or time given")
    if day is None:
        assert clock is not None
        today = datetime.combine(local_now.date(), clock, zone)
        ahead = (clock.hour, clock.minute) > (local_now.hour, local_now.minute)
        return today if ahead else datetime.combine(local_now.date() + timedelta(days=1), clock, zone)
    year, month, mday = day
    at = clock or time(0, 0)
    if year is None:
        this_year = _on(local_now.year, month, mday, at, zone)
        later = (month, mday, at.hour, at.minute) > (local_now.month, local_now.day, local_now.hour, local_now.minute)
        return this_year if later else _on(local_now.year + 1, month, mday, at, zone)
    return _on(year, month, mday, at, zone)


def _on(year: int, month: int, mday: int, at: time, zone: tzinfo | None) -> datetime:
    try:
        return datetime.combine(date(year, month, mday), at, zone)
    except ValueError as exc:
        raise BeginError(f"bad date {year}-{month:02d}-{mday:02d}: {exc}") from None


def _bounded(moment: datetime, now: datetime) -> datetime:
    if moment - now > _MAX_AHEAD:
        raise BeginError("the begin time is more than a year away")
    return moment
