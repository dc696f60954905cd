"""Store changes: whether anything the cycle reads was written since the leader last looked.

Migration 0021's triggers add a row to ``store_changes`` for each transaction (PostgreSQL) or
keep one row (SQLite) when a statement changes the tables the snapshot, gates and policy read.
``take_changes`` deletes what it sees: a write committed after that delete stays for the next
look, so none is missed; one seen here is never reported again.
"""

from __future__ import annotations

from sqlalchemy import text
from sqlalchemy.orm import Session


def take_changes(session: Session) -> int:
    """take_changes deletes the logged changes this transaction sees; how many there were (0: none)."""
    return session.execute(text("DELETE FROM store_changes")).rowcount or 0
