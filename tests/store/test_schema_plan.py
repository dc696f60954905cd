"""Rolling upgrades (docs/upgrades.md): every migration declares whether it is online-safe; the plan and its checks.

The first test is the guard the issue asks for: a new migration that forgets ``ONLINE_SAFE`` /
``ONLINE_REASON`` (or leaves the template's ``None``) fails here, naming the file.
"""

from __future__ import annotations

import ast
from datetime import timedelta
from pathlib import Path

import pytest
from alembic import command
from sqlalchemy import create_engine, delete, text

from meta.model.durations import utcnow
from meta.store.db import Database
from meta.store.migrate import alembic_config, current_revision, ensure_schema, head_revision, upgrade
from meta.store.models import LeaderLease
from meta.store.schema_plan import (
    MIGRATIONS_DIR,
    SchemaBehind,
    SchemaNewer,
    Step,
    newer_schema,
    pending,
    read_lease,
    refusal,
    running_on,
    shipped,
    verdict,
)
from tests.conftest import pg_url

VERSIONS = sorted((MIGRATIONS_DIR / "versions").glob("[0-9]*.py"))


def _module_values(path: Path) -> dict[str, object]:
    """_module_values are the module-level constants a migration file assigns, read without importing it."""
    values: dict[str, object] = {}
    for node in ast.parse(path.read_text(encoding="utf-8")).body:
        if isinstance(node, ast.Assign) and len(node.targets) == 1 and isinstance(node.targets[0], ast.Name):
            try:
                values[node.targets[0].id] = ast.literal_eval(node.value)
            except ValueError:
                continue
    return values


@pytest.mark.parametrize("path", VERSIONS, ids=lambda p: p.name)
def test_every_migration_declares_whether_it_is_online_safe(path: Path) -> None:
    values = _module_values(path)
    assert isinstance(values.get("ONLINE_SAFE"), bool), (
        f"{path.name}: set ONLINE_SAFE = True or False (may `metasched db upgrade` apply it while replicas of "
        "the version before still run? docs/upgrades.md)"
    )
    reason = values.get("ONLINE_REASON")
    assert isinstance(reason, str) and reason.strip() and "\n" not in reason and len(reason) <= 300, (
        f"{path.name}: ONLINE_REASON must say why in one line"
    )


def test_the_declarations_are_what_the_plan_reads() -> None:
    steps = shipped()
    assert [step.revision for step in steps] == [path.name[:4] for path in VERSIONS]
    for step, path in zip(steps, VERSIONS, strict=True):
        values = _module_values(path)
        assert (step.online_safe, step.reason) == (values["ONLINE_SAFE"], values["ONLINE_REASON"])
    # the template of `alembic revision` makes the author decide: its None fails the test above
    assert "ONLINE_SAFE = None" in (MIGRATIONS_DIR / "script.py.mako").read_text()


def test_pending_runs_from_the_stores_revision_to_head() -> None:
    every = [step.revision for step in shipped()]
    assert [s.revision for s in pending(None)] == every
    assert [s.revision for s in pending(every[-2])] == [head_revision()]
    assert pending(head_revision()) == []
    with pytest.raises(SchemaNewer, match="9999, which this version does not ship"):
        pending("9999")


SAFE = Step("0100", "a new table", True, "new table")
UNSAFE = Step("0101", "a dropped column", False, "older replicas read it")


def test_refusal_needs_an_unsafe_step_and_something_running() -> None:
    running = ["metasched serve 'old:1' leads (epoch 3, lease until ...)"]
    assert refusal([SAFE], running) is None
    assert refusal([SAFE, UNSAFE], []) is None
    why = refusal([SAFE, UNSAFE], running)
    assert why is not None and "0101 is not online-safe" in why and "old:1" in why and "--offline-ok" in why
    assert verdict([SAFE, UNSAFE], running, offline_ok=True).endswith("every older replica is stopped")
    assert verdict([], running, offline_ok=False) == "nothing to apply"


def _sqlite_at(tmp_path: Path, revision: str) -> tuple[Database, str]:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    command.upgrade(alembic_config(url), revision)
    return Database(url), url


def _lease(db: Database, seconds: float, holder: str = "old-host:42") -> None:
    with db.session() as session:
        session.execute(delete(LeaderLease))
        now = utcnow()
        session.add(LeaderLease(name="scheduler", holder=holder, epoch=7, expires_at=now + timedelta(seconds=seconds),
                                renewed_at=now))  # fmt: skip


def test_running_on_sees_a_fresh_lease_only(tmp_path: Path) -> None:
    db, _url = _sqlite_at(tmp_path, "0015")
    try:
        assert running_on(db.engine) == [] and not read_lease(db.engine).fresh
        _lease(db, -5)
        assert running_on(db.engine) == []  # expired: nobody leads
        _lease(db, 30)
        (line,) = running_on(db.engine)
        assert line.startswith("metasched serve 'old-host:42' leads (epoch 7")
    finally:
        db.dispose()


def test_ensure_schema_upgrades_an_idle_sqlite_store_and_waits_for_db_upgrade_otherwise(tmp_path: Path) -> None:
    db, url = _sqlite_at(tmp_path, "0015")
    try:
        _lease(db, 30)  # a daemon of the older version leads this one-host store
        needs = rf"at schema 0015, this version needs {head_revision()} \(pending: 0016 online-safe[,)]"
        with pytest.raises(SchemaBehind, match=needs):
            ensure_schema(db.engine, url)
        assert current_revision(db.engine) == "0015"
        _lease(db, -5)  # it stopped: the embedded store upgrades as it always did
        ensure_schema(db.engine, url)
        assert current_revision(db.engine) == head_revision()
    finally:
        db.dispose()


def test_a_store_a_newer_version_migrated_is_refused(tmp_path: Path) -> None:
    db, url = _sqlite_at(tmp_path, "head")
    try:
        with db.engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = '9999'"))
        assert newer_schema(db.engine) == "9999"
        with pytest.raises(SchemaNewer):
            ensure_schema(db.engine, url)
    finally:
        db.dispose()
    assert newer_schema(create_engine(f"sqlite:///{tmp_path / 'empty.sqlite'}")) is None


@pytest.mark.postgres
def test_on_postgresql_a_behind_store_waits_for_db_upgrade_and_other_sessions_count(
    pg_database: Database, tmp_path: Path
) -> None:
    """A schema of its own in the test database, at 0015; unnamed and metasched sessions count, psql does not."""
    schema = "ms_schema_plan_test"
    url = f"{pg_url()}{'&' if '?' in pg_url() else '?'}options=-csearch_path%3D{schema}"
    with pg_database.engine.begin() as connection:
        connection.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        connection.execute(text(f"CREATE SCHEMA {schema}"))
    db = Database(url)
    others = [create_engine(pg_url(), connect_args={"application_name": name}) for name in ("psql", "metasched old", "")]
    held = [engine.connect() for engine in others]
    try:
        command.upgrade(alembic_config(url), "0015")
        with pytest.raises(SchemaBehind):
            ensure_schema(db.engine, url)  # no lease, yet PostgreSQL is never migrated behind the admin's back
        running = running_on(db.engine)
        psql, metasched, unnamed = (str(c.exec_driver_sql("SELECT pg_backend_pid()").scalar()) for c in held)
        assert not any(f"session {psql} " in line for line in running), running
        assert any(f"session {metasched} " in line and "'metasched old'" in line for line in running), running
        assert any(f"session {unnamed} " in line and "no application name" in line for line in running), running
        upgrade(db.engine, url)
        assert current_revision(db.engine) == head_revision()
    finally:
        for connection in held:
            connection.close()
        for engine in others:
            engine.dispose()
        db.dispose()
        with pg_database.engine.begin() as connection:
            connection.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
