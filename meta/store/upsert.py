"""Dialect-aware INSERT ... ON CONFLICT DO NOTHING for PostgreSQL and SQLite."""

from __future__ import annotations

from typing import Any

from sqlalchemy.dialects import postgresql, sqlite
from sqlalchemy.orm import Session


def insert_ignore(session: Session, model: type[Any], **values: Any) -> None:
    """insert_ignore inserts a row unless one with the same key exists (race-free on both backends)."""
    dialect = session.get_bind().dialect.name
    insert = postgresql.insert if dialect == "postgresql" else sqlite.insert
    session.execute(insert(model).values(**values).on_conflict_do_nothing())
