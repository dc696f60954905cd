"""For step 4 (reconcile), batches: the period's work cut into transactions of at most a chunk of attempts.

A period's work is what Slurm changed, not how many jobs run (issue 24): clean moves grouped
by (from, to, reason, exit code) over all live attempts, the attempts that take the one-by-one
path, and the steady ones whose stored sighting is due. They are cut into batches of at most
``size`` attempts, each one fenced transaction; 100 ends among 10,000 running jobs are then one
transaction with one bulk move per group, not one per thousand live rows.
"""

from __future__ import annotations

from collections.abc import Iterator
from dataclasses import dataclass, field

from meta.cycle.reconcile.steady import GroupKey


@dataclass
class Batch:
    """Batch is one transaction's work: groups to move in bulk, attempts to follow alone, sightings to renew."""

    groups: dict[GroupKey, dict[str, str]] = field(default_factory=dict)
    alone: list[str] = field(default_factory=list)
    renew: list[str] = field(default_factory=list)
    size: int = 0


def batches(
    groups: dict[GroupKey, dict[str, str]], alone: list[str], renew: list[str], size: int
) -> Iterator[Batch]:
    """batches cuts the work into batches of at most ``size`` attempts, groups first (a group may span two)."""
    batch = Batch()
    for key, stimuli in groups.items():
        for attempt_id, stimulus in stimuli.items():
            batch.groups.setdefault(key, {})[attempt_id] = stimulus
            batch = yield from _full(batch, size)
    for name, ids in (("alone", alone), ("renew", renew)):
        for attempt_id in ids:
            getattr(batch, name).append(attempt_id)
            batch = yield from _full(batch, size)
    if batch.size:
        yield batch


def _full(batch: Batch, size: int) -> Iterator[Batch]:
    """_full counts one more attempt in the batch; once full it is yielded and a new one returned."""
    batch.size += 1
    if batch.size < size:
        return batch
    yield batch
    return Batch()
