"""Typed errors of the service API; the CLI maps each to a message and an exit code."""

from __future__ import annotations

# What one job's own data can raise while the daemon handles it (a value out of range, an encoding,
# an overflow): such an error quarantines that job with an ``InvalidSpec`` reason and the period goes
# on. Anything else — the database, Slurm, a lost lease — is everyone's problem and ends the period.
JOB_FAULTS: tuple[type[Exception], ...] = (ValueError, TypeError, KeyError, IndexError, ArithmeticError)
INVALID_SPEC = "InvalidSpec"


def invalid_spec_reason(exc: BaseException | str) -> str:
    """invalid_spec_reason is the typed reason a quarantined task or attempt carries."""
    # a refused spec (SpecError, with its field problems) speaks for itself; others name their type
    plain = isinstance(exc, str) or hasattr(exc, "problems")
    text = str(exc) if plain else f"{type(exc).__name__}: {exc}"
    line = " ".join(text.encode("utf-8", "backslashreplace").decode("utf-8").split())
    return f"{INVALID_SPEC}: {line}"[:500]


class MetaschedError(Exception):
    """MetaschedError is the base of every error the API raises on purpose."""

    exit_code = 1


class NotFound(MetaschedError):
    """NotFound: no such job, task or attempt visible to the caller."""


class Conflict(MetaschedError):
    """Conflict: the request contradicts stored state (e.g. a reused idempotency key)."""


class InvalidRequest(MetaschedError):
    """InvalidRequest: the request is malformed or not allowed in the current state."""

    exit_code = 2


class DependencyProblem(InvalidRequest):
    """DependencyProblem: a --dependency names a job that does not exist or that the caller may not see (sbatch's words)."""

    def __init__(self, message: str = "Job dependency problem") -> None:
        super().__init__(message)


class Unschedulable(MetaschedError):
    """Unschedulable: no node of the cluster could ever run this spec (rejected at submit)."""

    exit_code = 2


class Forbidden(MetaschedError):
    """Forbidden: the caller may not do this (tenants never touch each other's jobs)."""


class StaleFencingToken(MetaschedError):
    """StaleFencingToken: a write carried a token that is no longer the attempt's current one."""


class ConcurrentModification(MetaschedError):
    """ConcurrentModification: a compare-and-swap lost a race; the unit of work may be retried."""
