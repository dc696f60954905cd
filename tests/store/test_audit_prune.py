"""The audit stays append-only except for an admin's prune (migration 0015), on SQLite and PostgreSQL."""

from __future__ import annotations

from datetime import timedelta

import pytest
from sqlalchemy import delete, func, select, update
from sqlalchemy.exc import DBAPIError

from meta.model.durations import utcnow
from meta.store import audit
from meta.store.db import Database
from meta.store.models import AuditEvent, AuditPrunePermit


def _add(db: Database, days_ago: float, action: str) -> None:
    with db.session() as session:
        session.add(AuditEvent(at=utcnow() - timedelta(days=days_ago), actor="t", action=action, tenant=None,
                               subject="s", detail={}))  # fmt: skip


def _actions(db: Database) -> list[str]:
    with db.session() as session:
        return sorted(session.scalars(select(AuditEvent.action)))


def test_rows_cannot_be_deleted_or_changed_outside_a_prune(database: Database) -> None:
    _add(database, 200, "old")
    for statement in (delete(AuditEvent), update(AuditEvent).values(actor="someone else")):
        with pytest.raises(DBAPIError, match="write-once"):
            with database.session() as session:
                session.execute(statement)
    assert _actions(database) == ["old"]


def test_prune_deletes_only_older_rows_and_records_itself(database: Database) -> None:
    for days, action in ((200, "old"), (120, "old"), (30, "recent"), (0, "today")):
        _add(database, days, action)
    with database.session() as session:
        deleted = audit.prune(session, "root", utcnow() - timedelta(days=90), uid=0)
    assert deleted == 2
    assert _actions(database) == ["audit.prune", "recent", "today"]
    with database.session() as session:
        (line,) = [e for e in audit.read(session) if e.action == audit.PRUNE_ACTION]
        assert session.scalar(select(func.count()).select_from(AuditPrunePermit)) == 0  # the permit is gone
    assert line.actor == "root" and line.detail["deleted"] == 2 and line.detail["oldest"]
    with pytest.raises(DBAPIError, match="write-once"):  # and with it the right to delete
        with database.session() as session:
            session.execute(delete(AuditEvent))
