"""Store changes (migration 0021, meta/store/changes.py): every write the cycle reads is seen once, none is missed."""

from __future__ import annotations

import pytest
from sqlalchemy import text, update

from meta.service.api import Service
from meta.store.changes import take_changes
from meta.store.db import Database
from meta.store.models import Job, LeaderLease, Task
from tests.runtime.support import submit, training


def _taken(db: Database) -> int:
    with db.session() as session:
        return take_changes(session)


def test_a_write_is_taken_once(service: Service) -> None:
    _taken(service.db)
    job, (task_id,) = submit(service, training("seen"))
    assert _taken(service.db) > 0
    assert _taken(service.db) == 0
    service.hold(job)
    assert _taken(service.db) > 0
    with service.db.session() as session:
        session.execute(update(Task).where(Task.id == task_id).values(name="renamed"))
    assert _taken(service.db) > 0
    with service.db.session() as session:
        session.execute(text("DELETE FROM task_reasons"))  # a table the cycle writes every period is not watched
        session.execute(update(LeaderLease).values(holder="x"))
    assert _taken(service.db) == 0


def test_a_statement_that_changes_no_row_is_not_a_change(service: Service) -> None:
    submit(service, training("one"))
    _taken(service.db)
    with service.db.session() as session:
        session.execute(update(Job).where(Job.id == "no-such-job").values(name="x"))
    assert _taken(service.db) == 0


@pytest.mark.postgres
def test_a_write_committed_after_the_look_is_seen_by_the_next(pg_service: Service) -> None:
    """A transaction still open when the leader looks is not lost: its change shows at the next look."""
    job, _ = submit(pg_service, training("late"))
    _taken(pg_service.db)
    with pg_service.db.session() as writer:
        writer.execute(update(Job).where(Job.id == job).values(hold="user"))
        writer.flush()
        assert _taken(pg_service.db) == 0  # not committed yet: nothing to see
    assert _taken(pg_service.db) == 1  # one row per transaction, however many statements
