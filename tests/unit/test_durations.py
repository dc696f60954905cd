"""Durations and instants: user durations, Slurm time formats, round trips, ISO instants."""

from __future__ import annotations

from datetime import UTC, datetime, timedelta, timezone

import pytest

from meta.model.durations import (
    format_slurm_time,
    parse_duration_s,
    parse_instant,
    parse_slurm_time_s,
    utcnow,
)

MIN, HOUR, DAY = 60, 3600, 86400


# --- parse_duration_s -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("value", "seconds"),
    [
        ("90", 90),  # a bare number is seconds here (unlike Slurm's --time)
        ("0", 0),
        ("45s", 45),
        ("45sec", 45),
        ("90S", 90),
        ("30m", 30 * MIN),
        ("30min", 30 * MIN),
        ("10 min", 10 * MIN),
        ("4h", 4 * HOUR),
        ("2hr", 2 * HOUR),
        ("1.5h", 1.5 * HOUR),
        ("2d", 2 * DAY),
        ("1day", DAY),
        ("  4H  ", 4 * HOUR),
        ("1-12:00:00", DAY + 12 * HOUR),  # Slurm formats are accepted too
        ("5:30", 5 * MIN + 30),
        ("1:02:03", HOUR + 2 * MIN + 3),
        ("00:00:00", 0),
        (90, 90),
        (0, 0),
        (1.5, 1.5),
    ],
)
def test_parse_duration(value: object, seconds: float) -> None:
    result = parse_duration_s(value)
    assert isinstance(result, float)
    assert result == seconds


@pytest.mark.parametrize(
    "bad",
    [
        "",
        "   ",
        "abc",
        "4 hours",
        "1h30m",
        "1w",
        "h",
        "1.2.3h",
        "infinite",
        "1:2:3:4",
        "1-",
        "-5",
        "-1:00",
        "-3h",
    ],
)
def test_parse_duration_bad_strings(bad: str) -> None:
    with pytest.raises(ValueError):
        parse_duration_s(bad)


@pytest.mark.parametrize("bad", [-1, -0.001, True, False, None, [30], {"m": 30}])
def test_parse_duration_bad_values(bad: object) -> None:
    with pytest.raises(ValueError):
        parse_duration_s(bad)


def test_parse_duration_negative_message() -> None:
    with pytest.raises(ValueError, match="negative"):
        parse_duration_s(-5)


@pytest.mark.parametrize("value", [float("inf"), float("nan")])
def test_parse_duration_refuses_non_finite(value: float) -> None:
    with pytest.raises(ValueError):
        parse_duration_s(value)


# --- parse_slurm_time_s -----------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "seconds"),
    [
        # M
        ("5", 5 * MIN),
        ("0", 0),
        ("90", 90 * MIN),
        (" 10 ", 10 * MIN),
        # M:S
        ("5:30", 5 * MIN + 30),
        ("0:45", 45),
        ("90:00", 90 * MIN),
        # H:M:S
        ("1:02:03", HOUR + 2 * MIN + 3),
        ("48:00:00", 48 * HOUR),
        ("00:00:01", 1),
        # D-H
        ("2-3", 2 * DAY + 3 * HOUR),
        ("0-1", HOUR),
        # D-H:M
        ("2-3:04", 2 * DAY + 3 * HOUR + 4 * MIN),
        ("1-00:30", DAY + 30 * MIN),
        # D-H:M:S
        ("2-3:04:05", 2 * DAY + 3 * HOUR + 4 * MIN + 5),
        ("7-00:00:00", 7 * DAY),
    ],
)
def test_parse_slurm_time(text: str, seconds: int) -> None:
    result = parse_slurm_time_s(text)
    assert isinstance(result, float)
    assert result == seconds


@pytest.mark.parametrize("text", ["infinite", "UNLIMITED", "Unlimited", " infinite "])
def test_parse_slurm_time_refuses_unlimited(text: str) -> None:
    with pytest.raises(ValueError, match="unlimited"):
        parse_slurm_time_s(text)


@pytest.mark.parametrize(
    "text",
    ["", "x", "1h", "1:2:3:4", "-1", "1-", "-1:00", "1--2", "1-2-3", "1:2-3", "1.5", "1:", ":30", "a-1"],
)
def test_parse_slurm_time_bad(text: str) -> None:
    with pytest.raises(ValueError, match="cannot parse Slurm time"):
        parse_slurm_time_s(text)


# --- format_slurm_time ------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("seconds", "text"),
    [
        (0, "00:00:00"),
        (1, "00:01:00"),  # rounded up to a whole minute: never less than asked
        (59, "00:01:00"),
        (60, "00:01:00"),
        (61, "00:02:00"),
        (0.5, "00:01:00"),
        (HOUR, "01:00:00"),
        (4 * HOUR, "04:00:00"),
        (DAY - 1, "1-00:00:00"),
        (DAY, "1-00:00:00"),
        (DAY + HOUR, "1-01:00:00"),
        (DAY + 12 * HOUR, "1-12:00:00"),
        (3 * DAY + 61, "3-00:02:00"),
        (12 * DAY + 23 * HOUR + 59 * MIN, "12-23:59:00"),
    ],
)
def test_format_slurm_time(seconds: float, text: str) -> None:
    assert format_slurm_time(seconds) == text


@pytest.mark.parametrize("minutes", [0, 1, 59, 60, 61, 1439, 1440, 1441, 2 * 1440 + 125, 30 * 1440 + 1])
def test_format_then_parse_round_trips_whole_minutes(minutes: int) -> None:
    seconds = minutes * 60
    assert parse_slurm_time_s(format_slurm_time(seconds)) == seconds
    assert parse_duration_s(format_slurm_time(seconds)) == seconds


@pytest.mark.parametrize("seconds", [1, 29, 59, 61, 3599, 86399, 86401, 123456.7])
def test_format_rounds_up_to_the_next_minute(seconds: float) -> None:
    back = parse_slurm_time_s(format_slurm_time(seconds))
    assert seconds <= back < seconds + 60
    assert back % 60 == 0


@pytest.mark.parametrize("text", ["5", "5:30", "1:02:03", "2-3", "2-3:04", "2-3:04:05"])
def test_parse_then_format_is_stable(text: str) -> None:
    once = format_slurm_time(parse_slurm_time_s(text))
    assert format_slurm_time(parse_slurm_time_s(once)) == once


# --- parse_instant ----------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("text", "expected"),
    [
        ("2026-12-03T18:00:00Z", datetime(2026, 12, 3, 18, 0, tzinfo=UTC)),
        ("2026-12-03T18:00:00+00:00", datetime(2026, 12, 3, 18, 0, tzinfo=UTC)),
        ("2026-12-03T18:00:00+02:00", datetime(2026, 12, 3, 16, 0, tzinfo=UTC)),
        ("2026-12-03T18:00:00-05:30", datetime(2026, 12, 3, 23, 30, tzinfo=UTC)),
        ("2026-12-03T23:30:00-01:00", datetime(2026, 12, 4, 0, 30, tzinfo=UTC)),  # crosses midnight
        ("2026-12-03T18:00:00", datetime(2026, 12, 3, 18, 0, tzinfo=UTC)),  # naive = UTC
        ("2026-12-03 18:00:00", datetime(2026, 12, 3, 18, 0, tzinfo=UTC)),
        ("2026-12-03T18:00:00.250Z", datetime(2026, 12, 3, 18, 0, 0, 250000, tzinfo=UTC)),
        ("2026-12-03", datetime(2026, 12, 3, tzinfo=UTC)),
        ("  2026-12-03T18:00:00Z  ", datetime(2026, 12, 3, 18, 0, tzinfo=UTC)),
    ],
)
def test_parse_instant(text: str, expected: datetime) -> None:
    result = parse_instant(text)
    assert result == expected
    assert result.tzinfo is UTC  # always normalised to UTC, not merely aware


def test_parse_instant_datetimes() -> None:
    naive = datetime(2026, 1, 1, 12, 0)
    assert parse_instant(naive) == datetime(2026, 1, 1, 12, 0, tzinfo=UTC)
    eastern = datetime(2026, 1, 1, 12, 0, tzinfo=timezone(timedelta(hours=-5)))
    result = parse_instant(eastern)
    assert result == datetime(2026, 1, 1, 17, 0, tzinfo=UTC)
    assert result.tzinfo is UTC
    assert result.hour == 17


@pytest.mark.parametrize(
    "bad", ["", "garbage", "2026-13-01T00:00:00Z", "2026-12-03T25:00:00", "tomorrow", "12/03/2026"]
)
def test_parse_instant_bad_strings(bad: str) -> None:
    with pytest.raises(ValueError, match="cannot parse time"):
        parse_instant(bad)


@pytest.mark.parametrize("bad", [None, 1700000000, 1.5, True, ["2026-12-03"]])
def test_parse_instant_bad_types(bad: object) -> None:
    with pytest.raises(ValueError, match="ISO 8601"):
        parse_instant(bad)


def test_utcnow_is_aware_utc() -> None:
    now = utcnow()
    assert now.tzinfo is UTC
