"""Typed failures of Slurm commands: what the caller may do next depends on the type.

- ``SlurmRejected``: Slurm understood the request and said no. Retrying the same request is useless.
- ``SlurmTransient``: Slurm could not be asked (controller, slurmdbd or network trouble). Retry later.
- ``SlurmUnknownOutcome``: a mutating request may or may not have taken effect (timeout, lost
  reply, killed client). Look the outcome up (the job name carries the attempt id) before retrying.
- ``SlurmFailed``: the command failed for a reason we do not recognise; treat as transient with a
  bounded number of retries and alert on it.
- ``SlurmParseError``: the output did not have the expected shape.
"""

from __future__ import annotations

from collections.abc import Sequence


class SlurmError(Exception):
    """SlurmError is the base of every failure raised by slurm_bridge."""

    def __init__(
        self,
        message: str,
        *,
        command: str = "",
        argv: Sequence[str] = (),
        returncode: int | None = None,
        stderr: str = "",
    ) -> None:
        super().__init__(message)
        self.command = command
        self.argv = tuple(argv)
        self.returncode = returncode
        self.stderr = stderr


class SlurmRejected(SlurmError):
    """SlurmRejected means Slurm refused the request (invalid account, impossible shape, bad option)."""


class SlurmTransient(SlurmError):
    """SlurmTransient means Slurm was unreachable or busy; the same request may succeed later."""


class SlurmUnknownOutcome(SlurmError):
    """SlurmUnknownOutcome means a mutating request may have been applied; look it up before retrying."""


class SlurmFailed(SlurmError):
    """SlurmFailed is a failure with an unrecognised message; retry a bounded number of times."""


class SlurmParseError(SlurmError, ValueError):
    """SlurmParseError means Slurm's output did not have the expected shape."""


class ReservationInUse(SlurmRejected):
    """ReservationInUse means Slurm will not delete a reservation while jobs run in it."""
