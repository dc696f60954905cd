"""The store: reachable, migrated to this version's head; PostgreSQL's clock sampled on the way.

Nothing is created or changed: a SQLite file is opened read-only (a missing file is reported, not
made, as opening it through ``meta.store.db`` would), PostgreSQL with a connect and statement
timeout. The URL is shown redacted.
"""

from __future__ import annotations

import sqlite3
import time
from dataclasses import dataclass
from pathlib import Path
from urllib.parse import quote

from alembic.script import ScriptDirectory
from sqlalchemy import Engine, create_engine, text
from sqlalchemy.engine import make_url
from sqlalchemy.exc import SQLAlchemyError
from sqlalchemy.pool import NullPool

from meta.serve.doctor.check import Check, fail, first_line, ok
from meta.serve.doctor.clock import ClockSample
from meta.serve.doctor.inputs import CONNECT_TIMEOUT_S
from meta.store.db import redact
from meta.store.migrate import alembic_config, current_revision, head_revision

UPGRADE = "metasched db upgrade"


@dataclass(frozen=True)
class StoreState:
    """StoreState is what probing the store found: an error, or its revision (and PostgreSQL's clock)."""

    where: str  # the redacted URL
    error: str | None = None
    revision: str | None = None
    head: str = ""
    known: bool = True  # the revision is one this version ships (else a newer metasched migrated it)
    clock: ClockSample | None = None
    missing_file: bool = False  # a SQLite URL whose file does not exist


def probe_store(url: str) -> StoreState:
    """probe_store connects (read-only, bounded) and reads the schema revision; never raises for the store's faults."""
    where, head = redact(url), head_revision()
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        path = Path(parsed.database or "").expanduser()
        if not parsed.database or parsed.database == ":memory:" or not path.is_file():
            return StoreState(where, error=f"no store file {path}", head=head, missing_file=True)
        engine = _sqlite_read_only(path)
    else:
        engine = create_engine(url, poolclass=NullPool, connect_args={
            "connect_timeout": int(CONNECT_TIMEOUT_S), "options": f"-c statement_timeout={int(CONNECT_TIMEOUT_S * 1000)}"})
    try:
        revision = current_revision(engine)
        clock = _pg_clock(engine) if engine.dialect.name == "postgresql" else None
    except (SQLAlchemyError, sqlite3.Error, OSError) as exc:
        cause = getattr(exc, "orig", None) or exc
        return StoreState(where, error=first_line(str(cause)), head=head)
    finally:
        engine.dispose()
    return StoreState(where, revision=revision, head=head, known=revision is None or _known(revision), clock=clock)


def _sqlite_read_only(path: Path) -> Engine:
    """_sqlite_read_only opens a SQLite file read-only: the doctor never creates or changes a store."""
    uri = f"file:{quote(str(path))}?mode=ro"
    return create_engine("sqlite://", poolclass=NullPool,
                         creator=lambda: sqlite3.connect(uri, uri=True, timeout=CONNECT_TIMEOUT_S))  # fmt: skip


def _pg_clock(engine: Engine) -> ClockSample:
    """_pg_clock samples PostgreSQL's clock between two local readings."""
    with engine.connect() as connection:
        before = time.time()
        remote = connection.execute(text("SELECT EXTRACT(EPOCH FROM clock_timestamp())")).scalar_one()
        after = time.time()
    return ClockSample("store", float(remote), before, after)


def _known(revision: str) -> bool:
    """_known tells whether a revision is one of the migrations this version ships."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    return any(step.revision == revision for step in script.walk_revisions())


def store_check(state: StoreState) -> Check:
    """store_check: the store answers and its schema is this version's head."""
    if state.missing_file:
        return fail("store", f"{state.error}: point --db (METASCHED_DB, METASCHED_DB_FILE) at the daemon's store, or "
                             f"create it with `metasched --db URL db upgrade`")  # fmt: skip
    if state.error is not None:
        return fail("store", f"cannot reach the store {state.where}: {state.error} (check --db / METASCHED_DB / "
                             "METASCHED_DB_FILE, and that the database runs and admits this host)")  # fmt: skip
    if state.revision is None:
        return fail("store", f"{state.where} is empty (no schema): run `{UPGRADE}` with this URL")
    if not state.known:
        return fail("store", f"{state.where} is at {state.revision}, a migration this version does not ship "
                             f"(head {state.head}): a newer metasched migrated it; upgrade metasched here")  # fmt: skip
    if state.revision != state.head:
        return fail("store", f"{state.where} is at {state.revision}, head is {state.head}: run `{UPGRADE}`")
    return ok("store", f"{state.where} answers, schema at head {state.head}")
