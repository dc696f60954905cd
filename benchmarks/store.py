"""The store a benchmark fills: a fresh migrated SQLite file, or a PostgreSQL database it empties."""

from __future__ import annotations

import tempfile

from meta.store.db import Database
from meta.store.migrate import upgrade
from meta.store.reset import truncate_all


def open_store(url: str | None) -> Database:
    """open_store is a fresh migrated SQLite file, or the given PostgreSQL database emptied."""
    db = Database(url or f"sqlite:///{tempfile.mkdtemp()}/bench.sqlite")
    upgrade(db.engine, db.url)
    if url:
        truncate_all(db)
    return db
