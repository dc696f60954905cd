"""Check: one prerequisite's verdict (ok, warn or FAIL) and the one line that says what to fix."""

from __future__ import annotations

import enum
from collections.abc import Sequence
from dataclasses import dataclass
from typing import Any

EXIT_OK, EXIT_FAILED = 0, 1


class Status(enum.Enum):
    """Status is a check's verdict: ok, warn (works, but worth fixing) or fail (metasched will not work as set)."""

    OK = "ok"
    WARN = "warn"
    FAIL = "fail"


@dataclass(frozen=True)
class Check:
    """Check is one prerequisite's verdict: its short name, the status and a one-line message."""

    name: str
    status: Status
    message: str

    def to_dict(self) -> dict[str, Any]:
        """to_dict is the check as ``--json`` prints it."""
        return {"name": self.name, "status": self.status.value, "message": self.message}


def ok(name: str, message: str) -> Check:
    """ok is a passed check."""
    return Check(name, Status.OK, message)


def warn(name: str, message: str) -> Check:
    """warn is a check that passed with something worth fixing."""
    return Check(name, Status.WARN, message)


def fail(name: str, message: str) -> Check:
    """fail is a failed check: its message says what to fix."""
    return Check(name, Status.FAIL, message)


def exit_code(checks: Sequence[Check]) -> int:
    """exit_code is 1 when any check failed, else 0 (warnings pass)."""
    return EXIT_FAILED if any(check.status is Status.FAIL for check in checks) else EXIT_OK


def line(check: Check) -> str:
    """line is one check as the text output prints it: ``ok``/``warn``/``FAIL``, its name and message."""
    word = "FAIL" if check.status is Status.FAIL else check.status.value
    return f"{word:<4} {check.name}: {' '.join(check.message.split())}"


def summary(checks: Sequence[Check]) -> str:
    """summary is the last line: all is well (with the count of warnings), or how many checks failed."""
    failed = sum(check.status is Status.FAIL for check in checks)
    warned = sum(check.status is Status.WARN for check in checks)
    if failed:
        return f"{failed} of {len(checks)} checks failed: fix the FAIL lines above"
    return "all is well" + (f" ({warned} warning{'s' if warned != 1 else ''})" if warned else "")


def first_line(text: str, limit: int = 300) -> str:
    """first_line is the first non-empty line of an error's text, bounded: messages stay one line."""
    for candidate in str(text).splitlines():
        if candidate.strip():
            stripped = candidate.strip()
            return stripped if len(stripped) <= limit else stripped[: limit - 1] + "…"
    return "no message"
