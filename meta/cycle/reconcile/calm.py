"""For step 4 (reconcile), calm: Slurm shows what it showed last time and the store did not change — nothing moves.

A reconcile pass that moved nothing, wrote nothing, cancelled nothing and needed no accounting
read is remembered with the squeue it read. The next period, if no write reached the store
since (``meta/store/changes.py``), no launch is under way and squeue lists the very same rows,
the same pass would again move nothing: it is skipped until the first stored sighting falls due
(the leases it renews) — the pass then runs in full. The attempts count as seen now, as the pass
would have noted them.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import datetime

from meta.cycle.reconcile.observe import Observation
from meta.cycle.reconcile.settings import ReconcileResult
from meta.cycle.reconcile.sightings import Sightings
from slurm_bridge.parse.squeue import SqueueJob


@dataclass(frozen=True)
class Calm:
    """Calm is a pass that moved nothing: the squeue it read, the live attempts, until when it holds."""

    listed: tuple[SqueueJob, ...]
    live_ids: tuple[str, ...]
    foreign: int  # the other sites' jobs it counted (reported again, unchanged)
    until: datetime  # the first stored sighting due: a full pass renews it

    def shows(self, listed: list[SqueueJob], dark: dict[str, float]) -> bool:
        """shows: squeue lists the same rows, in the same order, and every cluster answers."""
        return not dark and len(listed) == len(self.listed) and tuple(listed) == self.listed


def quiet_pass(result: ReconcileResult, observation: Observation, wrote: bool) -> bool:
    """quiet_pass: the pass moved, wrote, cancelled and reported nothing, and squeue alone told it all."""
    events = (result.transitions or result.relaunch or result.orphans_cancelled or result.duplicates_cancelled
              or result.lost or result.spoofed or result.legacy_ignored)  # fmt: skip
    return not (events or wrote or observation.accounting_read or observation.dark or observation.spoofed
                or observation.unclaimed)  # fmt: skip


class CalmMemo:
    """CalmMemo holds the last quiet pass, while it may stand for the next."""

    def __init__(self, sightings: Sightings) -> None:
        self.sightings = sightings
        self._calm: Calm | None = None

    def forget(self) -> None:
        """forget makes the next pass a full one."""
        self._calm = None

    def current(self, now: datetime) -> Calm | None:
        """current is the remembered quiet pass, unless a sighting fell due since."""
        calm = self._calm
        return calm if calm is not None and now < calm.until else None

    def remember(self, result: ReconcileResult, observation: Observation, live_ids: list[str], wrote: bool) -> None:
        """remember keeps a quiet pass (forgets on any other) with the first moment a sighting falls due."""
        due = self.sightings.next_due(live_ids)
        if not quiet_pass(result, observation, wrote) or due is None:
            self._calm = None
            return
        self._calm = Calm(tuple(observation.listed), tuple(live_ids), result.foreign, due)

    def rest(self, calm: Calm, now: datetime) -> ReconcileResult:
        """rest is a calm period's result: its attempts seen now, the other sites' jobs counted as before."""
        self.sightings.seen(calm.live_ids, now)
        return ReconcileResult(slurm_reads=1, foreign=calm.foreign)
