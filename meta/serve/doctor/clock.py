"""Clocks in step: this host's against slurmctld's (``sdiag``) and the store's (PostgreSQL ``clock_timestamp()``).

MUNGE credentials and the API's own check (``tenants.munge.CLOCK_SKEW_S``) refuse a credential
encoded more than a few seconds "in the future", and one replica reads the times another wrote
(attempts' leases, grace windows): skewed clocks refuse clients and shift those. The leader lease
itself is judged by the store's clock (``meta/store/clock.py``), so skew does not move failovers.
Each sample is a remote time taken between two local readings; the remote clock's resolution and
half the round trip bound the error, so only a skew beyond that bound counts.
"""

from __future__ import annotations

import re
import time
from collections.abc import Sequence
from dataclasses import dataclass

from meta.serve.doctor.check import Check, fail, first_line, ok, warn
from slurm_bridge.errors import SlurmError
from slurm_bridge.runner import CommandRunner
from tenants.munge import CLOCK_SKEW_S

WARN_SKEW_S = 1.0  # NTP keeps hosts well within this; more is worth a look before it reaches CLOCK_SKEW_S
_SDIAG_TIME = re.compile(r"^sdiag output at .*\((?P<epoch>\d+)\)\s*$", re.MULTILINE)


@dataclass(frozen=True)
class ClockSample:
    """ClockSample is one remote clock read between two local readings (seconds since the epoch)."""

    source: str
    remote_s: float
    local_before_s: float
    local_after_s: float
    resolution_s: float = 0.0  # the remote time is truncated to this (sdiag prints whole seconds)

    @property
    def skew_s(self) -> float:
        """skew_s is how far the remote clock runs ahead of this host's (negative: behind)."""
        return self.remote_s + self.resolution_s / 2 - (self.local_before_s + self.local_after_s) / 2

    @property
    def error_s(self) -> float:
        """error_s bounds the measurement's own error: half the round trip plus half the resolution."""
        return (self.local_after_s - self.local_before_s) / 2 + self.resolution_s / 2


def sdiag_epoch(text: str) -> int | None:
    """sdiag_epoch is slurmctld's time from sdiag's ``sdiag output at ... (EPOCH)`` line, None without one."""
    match = _SDIAG_TIME.search(text)
    return int(match.group("epoch")) if match else None


def slurmctld_sample(runner: CommandRunner) -> tuple[ClockSample | None, str | None]:
    """slurmctld_sample reads slurmctld's clock with sdiag: (sample, None) or (None, why not)."""
    before = time.time()
    try:
        out = runner.run("sdiag", []).stdout
    except SlurmError as exc:
        return None, f"sdiag: {first_line(str(exc))}"
    after = time.time()
    epoch = sdiag_epoch(out)
    if epoch is None:
        return None, "sdiag printed no 'sdiag output at' time"
    return ClockSample("slurmctld", float(epoch), before, after, resolution_s=1.0), None


def clock_check(samples: Sequence[ClockSample], missing: Sequence[str], limit_s: float = CLOCK_SKEW_S) -> Check:
    """clock_check: no clock is further from this host's than ``limit_s`` (FAIL) or WARN_SKEW_S (warn), beyond error."""
    if not samples:
        return warn("clock", "no other clock could be read (" + "; ".join(missing) + "): compare them by hand")
    shown = ", ".join(f"{s.source} {s.skew_s:+.1f}s" for s in samples)
    worst = max(samples, key=lambda s: abs(s.skew_s) - s.error_s)
    beyond = abs(worst.skew_s) - worst.error_s
    if beyond > limit_s:
        return fail("clock", f"{worst.source}'s clock is {worst.skew_s:+.1f}s from this host's (over {limit_s:g}s): "
                             "MUNGE credentials are refused as rewound or expired and leases shift; "
                             "run NTP (chrony) on every host")  # fmt: skip
    unread = f"; not read: {'; '.join(missing)}" if missing else ""
    if beyond > WARN_SKEW_S:
        return warn("clock", f"clocks drift ({shown}; over {WARN_SKEW_S:g}s, the limit is {limit_s:g}s): "
                             f"check NTP{unread}")  # fmt: skip
    return ok("clock", f"in step with this host's: {shown}{unread}")
