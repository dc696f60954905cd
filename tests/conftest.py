"""Shared fixtures: databases (SQLite file and a real PostgreSQL) and a service over each.

PostgreSQL comes from METASCHED_TEST_PG_URL, else the URL `deploy/postgres up` provisions.
When it is unreachable the PostgreSQL variants skip with the reason — unless
METASCHED_REQUIRE_PG=1 (set by .ci/run), where they fail: CI never skips them.
"""

from __future__ import annotations

import fcntl
import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

import pytest
from sqlalchemy import create_engine, text
from sqlalchemy.engine import make_url

from meta.service.api import Service
from meta.store.db import Database
from meta.store.migrate import upgrade
from meta.store.reset import truncate_all
from tests.cluster_gate import require_cluster

DEFAULT_PG_URL = "postgresql+psycopg://metasched:metasched@127.0.0.1:5432/metasched_test"


def pg_url() -> str:
    """pg_url is the PostgreSQL the tests use."""
    return os.environ.get("METASCHED_TEST_PG_URL", DEFAULT_PG_URL)


@contextmanager
def empty_pg_database(suffix: str) -> Iterator[str]:
    """empty_pg_database is the URL of a new, empty database beside the test's own (``<name>_<suffix>``), dropped afterwards."""
    source = make_url(pg_url())
    name = f"{source.database}_{suffix}"
    admin = create_engine(source.set(database="postgres"), isolation_level="AUTOCOMMIT")
    with admin.connect() as connection:
        connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        connection.execute(text(f'CREATE DATABASE "{name}" OWNER "{source.username}"'))
    try:
        yield source.set(database=name).render_as_string(hide_password=False)
    finally:
        with admin.connect() as connection:
            connection.execute(text(f'DROP DATABASE IF EXISTS "{name}" WITH (FORCE)'))
        admin.dispose()


def _pg_problem(url: str) -> str | None:
    try:
        engine = create_engine(url)
        with engine.connect() as connection:
            connection.execute(text("select 1"))
        engine.dispose()
    except Exception as exc:  # noqa: BLE001 - any failure means "not reachable"
        return f"{type(exc).__name__}: {str(exc).splitlines()[0]}"
    return None


@pytest.fixture(scope="session")
def pg_database() -> Iterator[Database]:
    """pg_database is a migrated PostgreSQL test database (fails in CI when missing)."""
    url = pg_url()
    problem = _pg_problem(url)
    if problem:
        message = f"PostgreSQL not reachable at {url} ({problem}); run `deploy/postgres up`"
        if os.environ.get("METASCHED_REQUIRE_PG") == "1":
            pytest.fail(message)
        pytest.skip(message)
    database = Database(url)
    with database.engine.begin() as connection:
        # start from an empty schema so migrations are tested from scratch every session
        connection.execute(text("DROP SCHEMA public CASCADE"))
        connection.execute(text("CREATE SCHEMA public"))
    upgrade(database.engine, url)
    yield database
    database.dispose()


def sqlite_database(path: Path) -> Database:
    """sqlite_database is a fresh, migrated SQLite file database."""
    url = f"sqlite:///{path}"
    database = Database(url)
    upgrade(database.engine, url)
    return database


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def database(request: pytest.FixtureRequest, tmp_path: Path) -> Iterator[Database]:
    """database is an empty, migrated store on each backend."""
    if request.param == "sqlite":
        db = sqlite_database(tmp_path / "store.sqlite")
        yield db
        db.dispose()
        return
    db = request.getfixturevalue("pg_database")
    truncate_all(db)
    yield db


@pytest.fixture
def service(database: Database) -> Service:
    """service is the API over an empty store on each backend."""
    return Service(database)


@pytest.fixture
def pg_service(pg_database: Database) -> Service:
    """pg_service is the API over an empty PostgreSQL store."""
    truncate_all(pg_database)
    return Service(pg_database)


# --- the real Slurm dev cluster -------------------------------------------------------------

_LOCK = Path("/tmp/metasched-slurm-tests.lock")


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """slurm_cluster requires the dev cluster: skip with the reason, or fail when CI requires it."""
    require_cluster()


@pytest.fixture
def slurm_exclusive(slurm_cluster: None) -> Iterator[None]:
    """slurm_exclusive serialises tests that run a daemon: a daemon cancels jobs it does not own."""
    with _LOCK.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
        fcntl.flock(handle, fcntl.LOCK_UN)
