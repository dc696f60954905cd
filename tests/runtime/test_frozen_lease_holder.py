"""A leader frozen inside a fenced transaction cannot block a takeover (PostgreSQL).

The frozen leader is played by a connection with no idle-transaction timeout that locks the
lease row (as ``fence`` does) and then does nothing: before this fix a standby's
``try_acquire`` waited on that lock for as long as the holder stayed frozen.
"""

from __future__ import annotations

import threading
import time

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.exc import OperationalError

from meta.cycle.lease import Leadership, end_frozen_holders, try_acquire
from meta.service.api import Service
from tests.conftest import pg_url

LEASE_S = 1.0


def _acquire_within(service: Service, holder: str, seconds: float) -> Leadership | None:
    """_acquire_within retries try_acquire (as a standby's periods would) in a thread, bounded."""
    won: list[Leadership] = []

    def standby() -> None:
        deadline = time.monotonic() + seconds
        while time.monotonic() < deadline and not won:
            leadership = try_acquire(service.db, holder, LEASE_S)
            if leadership is not None:
                won.append(leadership)
            time.sleep(0.2)

    thread = threading.Thread(target=standby, daemon=True)
    thread.start()
    thread.join(seconds + 5)
    assert not thread.is_alive(), "try_acquire blocked on the frozen holder's row lock"
    return won[0] if won else None


def test_a_frozen_fenced_transaction_is_ended_and_the_standby_takes_over(pg_service: Service) -> None:
    first = try_acquire(pg_service.db, "frozen", LEASE_S)
    assert first is not None
    frozen = create_engine(pg_url()).connect()
    try:
        frozen.execute(text("SELECT * FROM leader_lease FOR UPDATE"))  # fence's lock, never released
        assert _acquire_within(pg_service, "standby", 0.5) is None  # the lease is still valid
        second = _acquire_within(pg_service, "standby", 10.0)
        assert second is not None and second.epoch == first.epoch + 1
        with pytest.raises(OperationalError):
            frozen.execute(text("SELECT 1"))  # its session was ended: nothing it did can commit
    finally:
        frozen.invalidate()
        frozen.close()


def test_a_live_transaction_on_a_valid_lease_is_left_alone(pg_service: Service) -> None:
    assert try_acquire(pg_service.db, "leader", 30.0) is not None
    busy = create_engine(pg_url()).connect()
    try:
        busy.execute(text("SELECT * FROM leader_lease FOR UPDATE"))
        assert end_frozen_holders(pg_service.db, 30.0) == []
        assert busy.execute(text("SELECT 1")).scalar() == 1
    finally:
        busy.rollback()
        busy.close()
