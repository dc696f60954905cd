"""An attempt's outcome from its Slurm records: group them by metasched attempt, fold het-job components into one."""

from __future__ import annotations

from collections.abc import Iterable, Sequence
from typing import Protocol, TypeVar

from slurm_bridge.states import Observed, Outcome
from slurm_bridge.tags import AttemptTag

# Which component outcome explains a finished het-job best: the first in this order wins.
_SEVERITY = (
    Outcome.FAILED,
    Outcome.OOM,
    Outcome.TIMEOUT,
    Outcome.PREEMPTED,
    Outcome.CANCELLED,
    Outcome.SUCCEEDED,
)


class TaggedJob(Protocol):
    """TaggedJob is any parsed job record with a metasched tag and an observed state."""

    @property
    def tag(self) -> AttemptTag | None:
        """tag is the attempt the record belongs to, if any."""
        ...

    @property
    def observed(self) -> Observed:
        """observed is the record's mapped state."""
        ...


J = TypeVar("J", bound=TaggedJob)


def by_attempt(jobs: Iterable[J]) -> dict[str, list[J]]:
    """by_attempt groups tagged jobs (squeue, sacct or scontrol records) by attempt id."""
    groups: dict[str, list[J]] = {}
    for job in jobs:
        if job.tag is not None:
            groups.setdefault(job.tag.attempt_id, []).append(job)
    return groups


def combined(observed: Sequence[Observed]) -> Observed:
    """combined folds the components of one attempt (het-job) into one Observed.

    Still active if any component is; once all ended, the most telling failure wins (a failed
    trainer explains why its evaluator was cancelled, not the other way round).
    """
    if not observed:
        raise ValueError("combined() needs at least one component")
    active = [o for o in observed if not o.terminal]
    if active:
        running = [o for o in active if o.outcome == Outcome.RUNNING]
        return (running or active)[0]
    return min(
        observed, key=lambda o: _SEVERITY.index(o.outcome) if o.outcome in _SEVERITY else len(_SEVERITY)
    )
