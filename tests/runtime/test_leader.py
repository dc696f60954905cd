"""Leader lease: acquire, renew, takeover after expiry, fencing of old epochs, release."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import update

from meta.cycle.lease import LEASE_NAME, Leadership, NotLeader, fence, release, renew, try_acquire
from meta.model.durations import utcnow
from meta.store.db import Database
from meta.store.models import LeaderLease


def _expire(db: Database) -> None:
    """_expire makes the current lease look expired (as if its holder paused past it)."""
    with db.session() as session:
        session.execute(
            update(LeaderLease)
            .where(LeaderLease.name == LEASE_NAME)
            .values(expires_at=utcnow() - timedelta(seconds=5))
        )


def test_acquire_on_empty_table_takes_epoch_1(database: Database) -> None:
    leadership = try_acquire(database, "a", 30)
    assert leadership == Leadership("a", 1)


def test_renew_keeps_the_epoch(database: Database) -> None:
    first = try_acquire(database, "a", 30)
    again = try_acquire(database, "a", 30)
    assert first is not None and again is not None
    assert again.epoch == first.epoch == 1
    assert renew(database, first, 30) is True
    with database.session() as session:
        fence(session, first)  # still the leader


def test_second_holder_cannot_take_an_unexpired_lease(database: Database) -> None:
    assert try_acquire(database, "a", 30) is not None
    assert try_acquire(database, "b", 30) is None


def test_second_holder_takes_an_expired_lease_with_next_epoch(database: Database) -> None:
    old = try_acquire(database, "a", 30)
    assert old is not None
    _expire(database)
    new = try_acquire(database, "b", 30)
    assert new == Leadership("b", old.epoch + 1)
    assert renew(database, old, 30) is False  # the old holder learns it lost


def test_fence_raises_for_a_superseded_epoch(database: Database) -> None:
    old = try_acquire(database, "a", 30)
    assert old is not None
    _expire(database)
    assert try_acquire(database, "b", 30) is not None
    with pytest.raises(NotLeader), database.session() as session:
        fence(session, old)


def test_fence_raises_for_an_expired_lease_even_without_a_successor(database: Database) -> None:
    leadership = try_acquire(database, "a", 30)
    assert leadership is not None
    _expire(database)
    with pytest.raises(NotLeader), database.session() as session:
        fence(session, leadership)


def test_same_holder_after_expiry_gets_a_new_epoch(database: Database) -> None:
    first = try_acquire(database, "a", 30)
    assert first is not None
    _expire(database)
    second = try_acquire(database, "a", 30)
    assert second is not None and second.epoch == first.epoch + 1
    with pytest.raises(NotLeader), database.session() as session:
        fence(session, first)


def test_release_lets_another_take_over_at_once(database: Database) -> None:
    old = try_acquire(database, "a", 300)
    assert old is not None
    release(database, old)
    new = try_acquire(database, "b", 300)
    assert new == Leadership("b", 2)
    with pytest.raises(NotLeader), database.session() as session:
        fence(session, old)


def test_release_by_a_stale_epoch_does_not_end_the_new_lease(database: Database) -> None:
    old = try_acquire(database, "a", 30)
    assert old is not None
    _expire(database)
    new = try_acquire(database, "b", 30)
    assert new is not None
    release(database, old)
    assert try_acquire(database, "c", 30) is None
    with database.session() as session:
        fence(session, new)
