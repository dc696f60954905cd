"""The leader lease judges expiry by the store's clock, not a replica's own (issue 25, clock skew; PostgreSQL).

Each test moves this process's wall clock (every ``utcnow`` the lease and the store's clock
module would read) 60 s ahead or behind, as on a head whose clock is off, and shows that the
lease's decisions do not move with it: a replica running ahead neither takes nor ends a live
leader's lease, and a replica running behind still sees an expired lease as expired. With the
local clock (before issue 25) every one of them failed.
"""

from __future__ import annotations

import importlib
import threading
import time
from collections.abc import Callable
from datetime import datetime, timedelta

import pytest
from sqlalchemy import create_engine, select, text, update
from sqlalchemy.exc import OperationalError

from meta.cycle.lease import (
    LEASE_NAME,
    Leadership,
    NotLeader,
    end_frozen_holders,
    fence,
    release,
    renew,
    try_acquire,
)
from meta.model.durations import utcnow
from meta.service.api import Service
from meta.store.db import Database
from meta.store.models import LeaderLease
from meta.store.site import SiteInUse, ensure_site_id, renew_site_id, stored_site_id
from tests.conftest import pg_url

pytestmark = pytest.mark.postgres

SKEW_S = 60.0
LEASE_S = 30.0
# every module whose "now" could judge a lease: the lease itself, the store's clock (its SQLite
# fallback) and the site id's leader check; one that does not exist (older code) is left out
CLOCK_MODULES = ("meta.cycle.lease", "meta.store.clock", "meta.store.site")

Skew = Callable[[float], None]


@pytest.fixture
def skew(monkeypatch: pytest.MonkeyPatch) -> Skew:
    """skew(seconds) sets this process's wall clock, as the lease code reads it, ``seconds`` off (0: true again)."""
    real = utcnow

    def set_skew(seconds: float) -> None:
        patched = 0
        for name in CLOCK_MODULES:
            try:
                module = importlib.import_module(name)
            except ModuleNotFoundError:
                continue
            if hasattr(module, "utcnow"):
                monkeypatch.setattr(module, "utcnow", lambda: real() + timedelta(seconds=seconds))
                patched += 1
        assert patched, "no module's clock to skew"

    return set_skew


def _lease(db: Database) -> LeaderLease:
    with db.session() as session:
        row = session.get(LeaderLease, LEASE_NAME)
        assert row is not None
        session.expunge(row)
        return row


def _server_now(db: Database) -> datetime:
    with db.engine.connect() as connection:
        return connection.execute(text("SELECT clock_timestamp()")).scalar_one()


def _expire_by_server(db: Database, seconds_ago: float = 5.0) -> None:
    """_expire_by_server ends the lease ``seconds_ago`` by PostgreSQL's clock (as if its holder paused past it)."""
    with db.session() as session:
        session.execute(
            update(LeaderLease)
            .where(LeaderLease.name == LEASE_NAME)
            .values(expires_at=text(f"clock_timestamp() - interval '{seconds_ago:g} seconds'"))
        )


def _left_s(db: Database) -> float:
    """_left_s is how long the lease has still to run by the server's clock."""
    return (_lease(db).expires_at - _server_now(db)).total_seconds()


def test_a_standby_running_ahead_does_not_take_a_live_lease(pg_service: Service, skew: Skew) -> None:
    db = pg_service.db
    leader = try_acquire(db, "leader", LEASE_S)
    assert leader == Leadership("leader", 1)
    skew(+SKEW_S)  # the standby's clock: the lease "expired" 30 s ago by it
    assert try_acquire(db, "standby", LEASE_S) is None
    row = _lease(db)
    assert (row.holder, row.epoch) == ("leader", 1)


def test_a_leader_running_ahead_keeps_its_lease_for_one_lease_length(pg_service: Service, skew: Skew) -> None:
    db = pg_service.db
    skew(+SKEW_S)
    leader = try_acquire(db, "leader", LEASE_S)
    assert leader == Leadership("leader", 1)
    assert LEASE_S - 2 < _left_s(db) <= LEASE_S  # not 90 s: its clock is not the lease's
    with db.session() as session:
        fence(session, leader)  # its own clock says the lease ran out; the store's says not
    assert renew(db, leader, LEASE_S) is True
    assert LEASE_S - 2 < _left_s(db) <= LEASE_S
    assert try_acquire(db, "leader", LEASE_S) == leader  # a renewal, the same epoch
    skew(0)
    assert try_acquire(db, "standby", LEASE_S) is None  # a standby with a true clock sees a normal lease


def test_a_replica_running_behind_sees_an_expired_lease_as_expired(pg_service: Service, skew: Skew) -> None:
    db = pg_service.db
    old = try_acquire(db, "old", LEASE_S)
    assert old is not None
    _expire_by_server(db)
    skew(-SKEW_S)  # by this clock the lease still has 55 s to run
    with pytest.raises(NotLeader, match="expired"), db.session() as session:
        fence(session, old)
    assert renew(db, old, LEASE_S) is False
    new = try_acquire(db, "standby", LEASE_S)
    assert new == Leadership("standby", old.epoch + 1)
    assert LEASE_S - 2 < _left_s(db) <= LEASE_S  # not -30 s: taken for a whole lease
    with db.session() as session:
        fence(session, new)


def test_a_release_by_a_replica_running_ahead_frees_the_lease_at_once(
    pg_service: Service, skew: Skew
) -> None:
    db = pg_service.db
    skew(+SKEW_S)
    old = try_acquire(db, "old", LEASE_S)
    assert old is not None
    release(db, old)  # by its clock "expired a second ago" would be 59 s from now
    skew(0)
    assert try_acquire(db, "standby", LEASE_S) == Leadership("standby", old.epoch + 1)


def test_a_replica_running_ahead_does_not_end_a_live_leaders_transaction(
    pg_service: Service, skew: Skew
) -> None:
    db = pg_service.db
    assert try_acquire(db, "leader", LEASE_S) is not None
    busy = create_engine(pg_url()).connect()
    try:
        busy.execute(text("SELECT * FROM leader_lease FOR UPDATE"))  # a fenced transaction of the leader
        skew(+SKEW_S)  # by this clock the lease expired a whole lease ago
        assert end_frozen_holders(db, LEASE_S) == []
        assert busy.execute(text("SELECT 1")).scalar() == 1
    finally:
        busy.rollback()
        busy.close()
        busy.engine.dispose()


def test_a_replica_running_behind_ends_a_frozen_holder(pg_service: Service, skew: Skew) -> None:
    db = pg_service.db
    first = try_acquire(db, "frozen", 1.0)
    assert first is not None
    frozen = create_engine(pg_url()).connect()
    try:
        frozen.execute(text("SELECT * FROM leader_lease FOR UPDATE"))  # fence's lock, never released
        time.sleep(2.5)  # the 1 s lease ran out more than a lease ago, by the server's clock
        skew(-SKEW_S)  # by this clock the lease has almost a minute to run
        ended = end_frozen_holders(db, 1.0)
        assert len(ended) == 1
        with pytest.raises(OperationalError):
            frozen.execute(text("SELECT 1"))
    finally:
        frozen.invalidate()
        frozen.close()
        frozen.engine.dispose()


def test_fence_reads_the_clock_after_waiting_for_the_row_lock(pg_service: Service) -> None:
    """A fence that waited for the row lock past the lease's end refuses: "now" is read once the lock is granted.

    (A flat ``SELECT ..., clock_timestamp() ... FOR UPDATE`` reads the clock before the wait.)
    """
    db = pg_service.db
    leader = try_acquire(db, "leader", 1.0)
    assert leader is not None
    holder = create_engine(pg_url()).connect()
    try:
        holder.execute(text("SELECT * FROM leader_lease FOR UPDATE"))  # held 1.5 s, the row left as it was
        timer = threading.Timer(1.5, holder.rollback)
        timer.start()
        with pytest.raises(NotLeader, match="expired"), db.session() as session:
            fence(session, leader)
        timer.join()
    finally:
        holder.close()
        holder.engine.dispose()


def test_the_site_id_is_not_renewed_under_a_live_leader_seen_from_a_host_running_ahead(
    pg_service: Service, skew: Skew
) -> None:
    db = pg_service.db
    site = ensure_site_id(db)
    assert try_acquire(db, "head-1", LEASE_S) is not None
    skew(+SKEW_S)
    with pytest.raises(SiteInUse, match="head-1"):
        renew_site_id(db)
    assert stored_site_id(db) == site


def test_the_store_clock_is_the_servers(pg_service: Service, skew: Skew) -> None:
    from meta.store.clock import store_clock

    db = pg_service.db
    skew(+SKEW_S)
    with db.session() as session:
        now = session.scalar(select(store_clock(session)))
        later = session.scalar(select(store_clock(session, 10.0)))
    assert now is not None and later is not None and now.tzinfo is not None
    assert abs((now - datetime.now(now.tzinfo)).total_seconds()) < 2  # the server's (this host's), not skewed
    assert 9.9 < (later - now).total_seconds() < 11
