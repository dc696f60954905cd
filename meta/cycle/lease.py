"""Cycle step 1, lease: one scheduler replica leads through a lease row whose epoch fences every write.

A replica acquires the lease when it is free or expired, taking ``epoch + 1``; it renews while
it leads. Every plan and launch is committed only after ``fence(session, epoch)`` re-reads the
row *with a row lock* in the same transaction: an old leader that was paused past its lease finds
a newer epoch and commits nothing.
"""

from __future__ import annotations

from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.model.errors import MetaschedError
from meta.store.db import Database
from meta.store.models import LeaderLease
from meta.store.upsert import insert_ignore

LEASE_NAME = "scheduler"


class NotLeader(MetaschedError):
    """NotLeader: this replica's epoch is no longer the current one; it must stop writing."""


@dataclass(frozen=True)
class Leadership:
    """Leadership is a held lease: who holds it and under which epoch."""

    holder: str
    epoch: int


def try_acquire(db: Database, holder: str, lease_s: float) -> Leadership | None:
    """try_acquire takes or renews the lease; returns the leadership, or None if another holds it."""
    with db.session() as session:
        now = utcnow()
        insert_ignore(
            session,
            LeaderLease,
            name=LEASE_NAME,
            holder="",
            epoch=0,
            expires_at=now - timedelta(seconds=1),
            renewed_at=now,
        )
        row = session.scalar(select(LeaderLease).where(LeaderLease.name == LEASE_NAME).with_for_update())
        assert row is not None
        expires = now + timedelta(seconds=lease_s)
        if row.holder == holder and row.expires_at > now:
            row.expires_at, row.renewed_at = expires, now  # renew: same epoch
            return Leadership(holder, row.epoch)
        if row.expires_at > now:
            return None
        row.holder, row.epoch, row.expires_at, row.renewed_at = holder, row.epoch + 1, expires, now
        return Leadership(holder, row.epoch)


def renew(db: Database, leadership: Leadership, lease_s: float) -> bool:
    """renew extends the lease if this replica still holds the same epoch; False means lost."""
    with db.session() as session:
        now = utcnow()
        result = session.execute(
            update(LeaderLease)
            .where(
                LeaderLease.name == LEASE_NAME,
                LeaderLease.holder == leadership.holder,
                LeaderLease.epoch == leadership.epoch,
                LeaderLease.expires_at > now,
            )
            .values(expires_at=now + timedelta(seconds=lease_s), renewed_at=now)
        )
        return result.rowcount == 1


def fence(session: Session, leadership: Leadership) -> None:
    """fence locks the lease row and raises NotLeader unless this epoch still leads, unexpired."""
    row = session.scalar(select(LeaderLease).where(LeaderLease.name == LEASE_NAME).with_for_update())
    now = utcnow()
    if row is None or row.epoch != leadership.epoch or row.holder != leadership.holder:
        raise NotLeader(f"epoch {leadership.epoch} was superseded (now {row.epoch if row else 'none'})")
    if row.expires_at <= now:
        raise NotLeader(f"lease of epoch {leadership.epoch} expired at {row.expires_at.isoformat()}")


def release(db: Database, leadership: Leadership) -> None:
    """release gives the lease up on clean shutdown so a standby takes over at once."""
    with db.session() as session:
        session.execute(
            update(LeaderLease)
            .where(LeaderLease.name == LEASE_NAME, LeaderLease.epoch == leadership.epoch)
            .values(expires_at=utcnow() - timedelta(seconds=1))
        )
