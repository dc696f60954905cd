"""For step 4 (reconcile), spoofed tags: another user's job carrying an attempt's tag is logged and audited once.

Such a job is neither followed nor cancelled (``ownership.py``): it is that user's own job, and
Slurm lets them run it. Each one is reported once per leader, as ``job.tag.spoofed`` with its
Slurm job id and user (nothing else: a comment or name may hold anything).
"""

from __future__ import annotations

import logging

from sqlalchemy.orm import Session

from meta.cycle.reconcile.observe import Observation, Sighting
from meta.cycle.reconcile.ownership import Claims
from meta.store import audit
from meta.store.db import Database

log = logging.getLogger("metasched.reconciler")
ACTION = "job.tag.spoofed"


class SpoofReports:
    """SpoofReports remembers which spoofed jobs were reported, so each is audited once while it is seen."""

    def __init__(self) -> None:
        self.reported: set[tuple[str, str]] = set()

    def report(self, db: Database, observation: Observation, claims: Claims) -> list[str]:
        """report logs and audits the spoofed jobs not reported yet, in one transaction; returns their Slurm job ids."""
        new = [(key, s) for key, s in sorted(observation.spoofed.items()) if key not in self.reported]
        if new:
            with db.session() as session:
                for (attempt_id, _), sighting in new:
                    _record(session, attempt_id, sighting, claims.of(attempt_id).tenant)
        # only what is still seen is remembered (the set stays as small as Slurm's own lists);
        # a period that skipped accounting cannot tell what left it, so it forgets nothing
        seen = set(observation.spoofed)
        self.reported = seen if observation.accounting_read else self.reported | seen
        return [key[1] for key, _ in new]


def _record(session: Session, attempt_id: str, sighting: Sighting, tenant: str | None) -> None:
    """_record logs one spoofed job and appends its audit row in the caller's transaction."""
    user = sighting.user[:64]
    log.warning(
        "Slurm job %s (uid %s, user %r) carries attempt %s's tag but is not its job: ignored, not cancelled",
        sighting.slurm_job_id, sighting.uid, user, attempt_id,
    )  # fmt: skip
    audit.record(
        session,
        "reconciler",
        ACTION,
        attempt_id[:128],
        tenant=tenant,
        slurm_job_id=sighting.slurm_job_id,
        uid=sighting.uid,
        user=user,
        seen_in=sighting.source,
    )
