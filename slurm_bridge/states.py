"""Map Slurm job states to the few outcomes metasched acts on, plus a failure category for retries.

The category is ``meta.spec.FailureCategory``, the one retry policies select on.
"""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum
from signal import Signals

from meta.model.kinds import FailureCategory


class Outcome(StrEnum):
    """Outcome is what an attempt's Slurm job is observed to be doing or to have done."""

    PENDING = "pending"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    PREEMPTED = "preempted"
    CANCELLED = "cancelled"
    TIMEOUT = "timeout"
    OOM = "oom"
    UNKNOWN = "unknown"


_TERMINAL = {
    Outcome.SUCCEEDED,
    Outcome.FAILED,
    Outcome.PREEMPTED,
    Outcome.CANCELLED,
    Outcome.TIMEOUT,
    Outcome.OOM,
}


@dataclass(frozen=True, slots=True)
class Observed:
    """Observed is one job's mapped state: outcome, failure category, exit code and signal."""

    outcome: Outcome
    category: FailureCategory | None
    slurm_state: str
    exit_code: int | None = None
    signal: int | None = None

    @property
    def terminal(self) -> bool:
        """terminal tells whether the job has ended (its capacity is free once Slurm says so)."""
        return self.outcome in _TERMINAL


# Non-terminal states. Everything that still holds nodes counts as running (COMPLETING,
# SUSPENDED, STAGE_OUT ...), because capacity is what the scheduler cares about.
_ACTIVE: dict[str, Outcome] = {
    "PENDING": Outcome.PENDING,
    "REQUEUED": Outcome.PENDING,
    "REQUEUE_HOLD": Outcome.PENDING,
    "REQUEUE_FED": Outcome.PENDING,
    "CONFIGURING": Outcome.RUNNING,
    "RUNNING": Outcome.RUNNING,
    "COMPLETING": Outcome.RUNNING,
    "SUSPENDED": Outcome.RUNNING,
    "RESIZING": Outcome.RUNNING,
    "SIGNALING": Outcome.RUNNING,
    "STAGE_OUT": Outcome.RUNNING,
    "STOPPED": Outcome.RUNNING,
    "RESV_DEL_HOLD": Outcome.PENDING,
    "POWER_UP_NODE": Outcome.RUNNING,
}

_ENDED: dict[str, tuple[Outcome, FailureCategory | None]] = {
    "COMPLETED": (Outcome.SUCCEEDED, None),
    "CANCELLED": (Outcome.CANCELLED, FailureCategory.CANCELLED),
    "REVOKED": (Outcome.CANCELLED, FailureCategory.CANCELLED),
    "TIMEOUT": (Outcome.TIMEOUT, FailureCategory.TIMEOUT),
    "DEADLINE": (Outcome.TIMEOUT, FailureCategory.TIMEOUT),
    "NODE_FAIL": (Outcome.FAILED, FailureCategory.NODE_FAILURE),
    "BOOT_FAIL": (Outcome.FAILED, FailureCategory.NODE_FAILURE),
    "LAUNCH_FAILED": (Outcome.FAILED, FailureCategory.NODE_FAILURE),
    "PREEMPTED": (Outcome.PREEMPTED, FailureCategory.PREEMPTED),
    "OUT_OF_MEMORY": (Outcome.OOM, FailureCategory.OOM),
    "SPECIAL_EXIT": (Outcome.FAILED, FailureCategory.USER_ERROR),
}


def base_state(state: str) -> str:
    """base_state normalises ``CANCELLED by 0``, ``cancelled`` or ``["FAILED"]`` text to ``CANCELLED``."""
    words = state.strip().replace("+", " ").split()
    return words[0].upper() if words else ""


def map_state(state: str, exit_code: int | None = None, signal: int | None = None) -> Observed:
    """map_state maps a Slurm job state (and exit code / signal) to an Observed outcome."""
    base = base_state(state)
    if base in _ACTIVE:
        return Observed(_ACTIVE[base], None, base, exit_code, signal)
    if base == "FAILED":
        return Observed(Outcome.FAILED, _failed_category(exit_code, signal), base, exit_code, signal)
    if base in _ENDED:
        outcome, category = _ENDED[base]
        return Observed(outcome, category, base, exit_code, signal)
    # An unknown state is not terminal: the reconciler looks again rather than acting on a guess.
    return Observed(Outcome.UNKNOWN, FailureCategory.UNKNOWN, base, exit_code, signal)


def _failed_category(exit_code: int | None, signal: int | None) -> FailureCategory:
    """_failed_category: a non-zero exit is the program's own failure; anything else is unknown."""
    if exit_code:
        return FailureCategory.USER_ERROR
    # A signal without a Slurm state of its own (e.g. SIGKILL from an admin or the kernel) or
    # a launch failure with 0:0 says nothing about whose fault it was.
    return FailureCategory.UNKNOWN


def killed_by(observed: Observed, signal_name: str) -> bool:
    """killed_by tells whether a failed job died of ``signal_name`` (e.g. ``USR1``).

    Either Slurm's signal field names it (the batch shell itself was killed), or the exit code
    is a shell's 128+N (srun, or a shell waiting on a task the signal killed, exits so).
    """
    number = Signals[f"SIG{signal_name.upper().removeprefix('SIG')}"].value
    return observed.outcome == Outcome.FAILED and (
        observed.signal == number or observed.exit_code == 128 + number
    )
