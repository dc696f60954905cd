"""For step 4 (reconcile), seen: when each live attempt was last seen, and the steady ones' sightings stored in one statement."""

from __future__ import annotations

from collections.abc import Iterable
from datetime import datetime, timedelta

from sqlalchemy import or_, update
from sqlalchemy.orm import Session

from meta.cycle.reconcile.settings import LIVE, ReconcileSettings
from meta.store.chunks import among
from meta.store.models import Attempt


class Sightings:
    """Sightings remembers when each live attempt was last seen and when this reconciler last stored it."""

    def __init__(self, settings: ReconcileSettings) -> None:
        self.settings = settings
        # when each live attempt was last seen, where the store's last_seen_at may be up to twice
        # renew_every_s older; only memory: a new leader counts from the stored sighting
        self.seen_at: dict[str, datetime] = {}
        self.stored_at: dict[str, datetime] = {}  # when this reconciler last wrote each one's sighting

    def columns(self, now: datetime) -> dict[str, datetime]:
        """columns are what a sighting sets: when it was seen, and the lease it renews."""
        return {"last_seen_at": now, "lease_expires_at": now + timedelta(seconds=self.settings.lease_s)}

    def stored(self, attempt_ids: Iterable[str], now: datetime) -> None:
        """stored notes that these attempts' sightings were written at ``now``."""
        self.stored_at.update(dict.fromkeys(attempt_ids, now))

    def last(self, attempt_id: str, stored: datetime) -> datetime:
        """last is the latest sighting of an attempt: the stored one, or a later one remembered."""
        remembered = self.seen_at.get(attempt_id)
        return max(stored, remembered) if remembered is not None else stored

    def keep(self, live_ids: Iterable[str]) -> None:
        """keep forgets every attempt that is no longer live."""
        still = set(live_ids)
        self.seen_at = {a: at for a, at in self.seen_at.items() if a in still}
        self.stored_at = {a: at for a, at in self.stored_at.items() if a in still}

    def seen(self, attempt_ids: Iterable[str], now: datetime) -> None:
        """seen notes these attempts seen at ``now`` (a calm period's, calm.py)."""
        self.seen_at.update(dict.fromkeys(attempt_ids, now))

    def next_due(self, attempt_ids: Iterable[str]) -> datetime | None:
        """next_due is the first moment one of these attempts' stored sightings falls due (None: one was never stored)."""
        stored = self.stored_at
        try:
            oldest = min((stored[a] for a in attempt_ids), default=None)
        except KeyError:
            return None
        return None if oldest is None else oldest + self._interval()

    def _interval(self) -> timedelta:
        """_interval is how long a stored sighting lasts before it is written again."""
        return timedelta(seconds=min(self.settings.renew_every_s, self.settings.lease_s / 3))

    def _due(self, now: datetime) -> datetime:
        """_due is the moment a sighting stored at or before it must be written again."""
        return now - self._interval()

    def due(self, attempt_ids: list[str], now: datetime) -> list[str]:
        """due notes these attempts seen at ``now`` and returns those whose stored sighting must be written again."""
        limit = self._due(now)
        stored = self.stored_at
        for attempt_id in attempt_ids:
            self.seen_at[attempt_id] = now
        return [a for a in attempt_ids if (at := stored.get(a)) is None or at <= limit]

    def renew(self, session: Session, attempt_ids: list[str], now: datetime) -> None:
        """renew records a sighting and renews the lease of steady attempts whose stored one is due, in one statement."""
        if not attempt_ids:
            return
        due = self._due(now)
        stored = self.stored_at
        # only those this reconciler has not written lately are sent (the WHERE re-checks the store)
        candidates = [a for a in attempt_ids if (at := stored.get(a)) is None or at <= due]
        for attempt_id in attempt_ids:
            self.seen_at[attempt_id] = now
        if not candidates:
            return
        session.execute(
            update(Attempt)
            .where(
                among(session, Attempt.id, candidates),
                Attempt.state.in_(LIVE),
                or_(Attempt.last_seen_at.is_(None), Attempt.last_seen_at <= due),
            )
            .values(**self.columns(now))
        )
        for attempt_id in candidates:
            stored[attempt_id] = now  # written now, or found written within the interval
