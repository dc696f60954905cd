"""Cycle step 3b, members: a site with ``clusters: auto`` follows slurmdbd's cluster list (issue 26).

At the topology cadence, right after the shares: ``sacctmgr show clusters`` says which clusters
the shared slurmdbd serves. One registered since the last read joins the site (its nodes come in
with the next inventory read); one no longer listed leaves once no live attempt of this site is
on it — before that its jobs would look lost — and until then stays as it was. Added and removed
clusters are logged and audited. Accounting being down skips the step; it never fails the period.
"""

from __future__ import annotations

import logging

from sqlalchemy import select

from meta.cycle.inventory.cadence import Cadence
from meta.cycle.reconcile.dark import attempt_cluster
from meta.model.states import LIVE_ATTEMPT_STATES
from meta.store import audit
from meta.store.db import Database
from meta.store.models import Attempt
from slurm_bridge.errors import SlurmError

log = logging.getLogger("metasched.clusters")
_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]


class MemberSync:
    """MemberSync keeps a following ClusterSet's members equal to slurmdbd's clusters."""

    def __init__(self, db: Database, client: object, refresh_s: float = 300.0) -> None:
        self.db = db
        self.client = client
        self.cadence = Cadence(refresh_s)

    @property
    def following(self) -> bool:
        """following tells whether the daemon's Slurm follows slurmdbd (a ClusterSet built from ``auto``)."""
        return bool(getattr(self.client, "follows_registry", False))

    def sync_if_due(self, now: float) -> tuple[list[str], list[str]] | None:
        """sync_if_due syncs on the first call and then every ``refresh_s`` (monotonic seconds)."""
        return self.sync() if self.following and self.cadence.due(now) else None

    def sync(self) -> tuple[list[str], list[str]] | None:
        """sync follows the registry once; (added, removed), or None when slurmdbd did not answer."""
        try:
            added, removed = self.client.follow_registry(self.live_clusters())  # type: ignore[attr-defined]
        except SlurmError as exc:
            log.warning("cannot read slurmdbd's clusters (the site's clusters unchanged): %s", exc)
            return None
        if added or removed:
            log.info("Slurm clusters joined: %s; left: %s", ", ".join(added) or "none", ", ".join(removed) or "none")
            with self.db.session() as session:
                for name in added:
                    audit.record(session, "slurm", "cluster.join", name)
                for name in removed:
                    audit.record(session, "slurm", "cluster.leave", name)
        return added, removed

    def live_clusters(self) -> set[str]:
        """live_clusters are the clusters some live attempt of this site is on."""
        with self.db.session() as session:
            attempts = session.scalars(select(Attempt).where(Attempt.state.in_(_LIVE))).all()
            return {cluster for cluster in map(attempt_cluster, attempts) if cluster}
