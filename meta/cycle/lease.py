"""Cycle step 1, lease: one scheduler replica leads through a lease row whose epoch fences every write.

A replica acquires the lease when it is free or expired, taking ``epoch + 1``; it renews while
it leads. Every plan and launch is committed only after ``fence(session, epoch)`` re-reads the
row *with a row lock* in the same transaction: an old leader that was paused past its lease finds
a newer epoch and commits nothing.

A standby reads the row without a lock first and locks it only when the lease is free or
expired (or its own), so a standby never holds up the leader's fenced writes.

That row lock is also the one way a paused leader could block a takeover: frozen inside a
fenced transaction, it holds the lock for as long as it is frozen. So a standby waits for the
row at most ``LOCK_WAIT_S``; when the lease has been expired for a whole lease period and a
transaction that began before that still holds the row, the standby ends that session
(PostgreSQL rolls the frozen transaction back, so nothing of it is ever committed) and takes
the lease on its next period.

Every expiry is judged by the store's clock (``meta/store/clock.py``: PostgreSQL's
``clock_timestamp()``, read in the statement that reads or writes the row), never a replica's
own: two heads whose clocks differ by more than the lease would otherwise disagree on whether
it ran out: the one running ahead took a healthy leader's lease, the one running behind waited
past an expired one (issue 25, ``tests/faults/test_clock_skew.py``).
"""

from __future__ import annotations

import logging
from dataclasses import dataclass
from datetime import timedelta

from sqlalchemy import Row, select, text, update
from sqlalchemy.exc import OperationalError
from sqlalchemy.orm import Session

from meta.model.errors import MetaschedError
from meta.store.clock import store_clock
from meta.store.db import Database
from meta.store.models import LeaderLease
from meta.store.upsert import insert_ignore

LEASE_NAME = "scheduler"
LOCK_WAIT_S = 1.0  # how long a standby waits for the lease row before looking for a frozen holder

log = logging.getLogger("metasched.lease")


class NotLeader(MetaschedError):
    """NotLeader: this replica's epoch is no longer the current one; it must stop writing."""


@dataclass(frozen=True)
class Leadership:
    """Leadership is a held lease: who holds it and under which epoch."""

    holder: str
    epoch: int


def try_acquire(db: Database, holder: str, lease_s: float) -> Leadership | None:
    """try_acquire takes or renews the lease; returns the leadership, or None if another holds it."""
    try:
        return _acquire(db, holder, lease_s)
    except OperationalError as exc:
        if not _lock_not_available(exc):
            raise
    end_frozen_holders(db, lease_s)
    return None


def _acquire(db: Database, holder: str, lease_s: float) -> Leadership | None:
    with db.session() as session:
        # a standby looks before it locks: while another replica holds an unexpired lease there is
        # nothing to take, and a standby on a slow link that locked the row each period held every
        # fenced write of the leader behind its own round trips (deploy/site, 500 ms and 30% loss:
        # the healthy leader's lease ran out); a plain read of the committed row takes no lock
        seen = session.execute(
            select(LeaderLease.holder, LeaderLease.expires_at, store_clock(session).label("now")).where(
                LeaderLease.name == LEASE_NAME
            )
        ).first()
        if seen is not None and seen.holder != holder and seen.expires_at > seen.now:
            return None
        if seen is None:
            insert_ignore(
                session,
                LeaderLease,
                name=LEASE_NAME,
                holder="",
                epoch=0,
                expires_at=store_clock(session, -1.0),
                renewed_at=store_clock(session),
            )
        if db.dialect == "postgresql":
            session.execute(text(f"SET LOCAL lock_timeout = {int(LOCK_WAIT_S * 1000)}"))
        row = _locked_row(session)
        assert row is not None
        now = row.now
        expires = now + timedelta(seconds=lease_s)
        if row.holder == holder and row.expires_at > now:
            _set(session, expires_at=expires, renewed_at=now)  # renew: same epoch
            return Leadership(holder, row.epoch)
        if row.expires_at > now:
            return None
        _set(session, holder=holder, epoch=row.epoch + 1, expires_at=expires, renewed_at=now)
        return Leadership(holder, row.epoch + 1)


def _locked_row(session: Session) -> Row | None:
    """_locked_row locks the lease row and reads it with the store's time *after* the lock was granted.

    The lock is taken in a subquery so that the clock is read above it: in one flat
    ``SELECT ..., clock_timestamp() ... FOR UPDATE`` PostgreSQL evaluates the clock before it
    waits for the lock, and a wait on a holder that then left the row unchanged would judge the
    expiry by a time from before the wait.
    """
    locked = (
        select(LeaderLease.holder, LeaderLease.epoch, LeaderLease.expires_at)
        .where(LeaderLease.name == LEASE_NAME)
        .with_for_update()
        .subquery()
    )
    return session.execute(
        select(locked.c.holder, locked.c.epoch, locked.c.expires_at, store_clock(session).label("now"))
    ).first()


def _set(session: Session, **values: object) -> None:
    """_set writes the locked lease row."""
    session.execute(update(LeaderLease).where(LeaderLease.name == LEASE_NAME).values(**values))


def _lock_not_available(exc: OperationalError) -> bool:
    """_lock_not_available tells a lock_timeout (SQLSTATE 55P03) from other store errors."""
    return getattr(exc.orig, "sqlstate", None) == "55P03"


def end_frozen_holders(db: Database, lease_s: float) -> list[int]:
    """end_frozen_holders terminates sessions that hold the lease row long after the lease expired.

    Only transactions that began before the lease expired a whole lease period ago qualify: a
    live leader renews well before expiry and a standby's own look at the row lasts milliseconds.
    Returns the PostgreSQL pids it ended (none on SQLite, whose writers cannot be frozen apart).
    """
    if db.dialect != "postgresql":
        return []
    with db.session() as session:
        row = session.execute(
            select(LeaderLease.epoch, LeaderLease.expires_at, store_clock(session).label("now")).where(
                LeaderLease.name == LEASE_NAME
            )
        ).first()
        if row is None or row.expires_at > row.now - timedelta(seconds=lease_s):
            return []
        pids = list(
            session.scalars(
                text(
                    "SELECT DISTINCT a.pid FROM pg_stat_activity a JOIN pg_locks l ON l.pid = a.pid "
                    "WHERE l.relation = CAST('leader_lease' AS regclass) AND l.granted "
                    "AND a.datname = current_database() "
                    "AND a.pid <> pg_backend_pid() AND a.xact_start < :before"
                ),
                {"before": row.expires_at},
            )
        )
        for pid in pids:
            session.execute(text("SELECT pg_terminate_backend(:pid)"), {"pid": pid})
    for pid in pids:
        log.warning(
            "ended PostgreSQL session %d: it held the lease row of epoch %d, expired since %s (a frozen leader)",
            pid, row.epoch, row.expires_at.isoformat(),
        )  # fmt: skip
    return pids


def renew(db: Database, leadership: Leadership, lease_s: float) -> bool:
    """renew extends the lease if this replica still holds the same epoch; False means lost."""
    with db.session() as session:
        result = session.execute(
            update(LeaderLease)
            .where(
                LeaderLease.name == LEASE_NAME,
                LeaderLease.holder == leadership.holder,
                LeaderLease.epoch == leadership.epoch,
                LeaderLease.expires_at > store_clock(session),
            )
            .values(expires_at=store_clock(session, lease_s), renewed_at=store_clock(session))
        )
        return result.rowcount == 1


def lock_lease_row(session: Session) -> LeaderLease | None:
    """lock_lease_row locks the lease row for the rest of the transaction and returns it, judging nothing.

    Every fenced transaction takes this lock first; a write that is guarded otherwise (a fencing
    token) takes it too when it runs beside the period, so both lock rows in the same order.
    """
    return session.scalar(select(LeaderLease).where(LeaderLease.name == LEASE_NAME).with_for_update())


def fence(session: Session, leadership: Leadership) -> None:
    """fence locks the lease row and raises NotLeader unless this epoch still leads, unexpired by the store's clock.

    One statement: the lock, the row and the store's time (no round trip of its own).
    """
    row = _locked_row(session)
    if row is None or row.epoch != leadership.epoch or row.holder != leadership.holder:
        raise NotLeader(f"epoch {leadership.epoch} was superseded (now {row.epoch if row else 'none'})")
    if row.expires_at <= row.now:
        raise NotLeader(f"lease of epoch {leadership.epoch} expired at {row.expires_at.isoformat()}")


def release(db: Database, leadership: Leadership) -> None:
    """release gives the lease up on clean shutdown so a standby takes over at once."""
    with db.session() as session:
        session.execute(
            update(LeaderLease)
            .where(LeaderLease.name == LEASE_NAME, LeaderLease.epoch == leadership.epoch)
            .values(expires_at=store_clock(session, -1.0))
        )
