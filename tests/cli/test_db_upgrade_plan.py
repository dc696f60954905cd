"""``metasched db upgrade --plan`` and the rolling-upgrade check of ``db upgrade`` (docs/upgrades.md).

SQLite stores migrated to an older revision with Alembic, a leader lease written as an older
replica's would be: fresh (it leads) or expired (it stopped). 0010 is not online-safe (an older
leader ignores holds), 0016 is.
"""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from alembic import command
from sqlalchemy import delete, text

from meta.model.durations import utcnow
from meta.store.db import Database
from meta.store.migrate import alembic_config, current_revision, head_revision
from meta.store.models import LeaderLease
from tests.cli.test_cli import as_json, make_runner, ok


def _store(tmp_path: Path, revision: str, lease_s: float | None) -> tuple[str, Database]:
    url = f"sqlite:///{tmp_path / 'store.sqlite'}"
    command.upgrade(alembic_config(url), revision)
    db = Database(url)
    if lease_s is not None:
        _set_lease(db, lease_s)
    return url, db


def _set_lease(db: Database, lease_s: float) -> None:
    with db.session() as session:
        session.execute(delete(LeaderLease))
        now = utcnow()
        session.add(LeaderLease(name="scheduler", holder="old-head:77", epoch=3,
                                expires_at=now + timedelta(seconds=lease_s), renewed_at=now))  # fmt: skip


def test_plan_lists_each_pending_migration_and_changes_nothing(tmp_path: Path) -> None:
    url, db = _store(tmp_path, "0009", lease_s=60)
    try:
        out = ok(make_runner(url)("db", "upgrade", "--plan"))
        assert f"at 0009, head {head_revision()}, {int(head_revision()) - 9} pending" in out
        assert "0010  NOT online-safe" in out and "0016  online-safe" in out
        assert "metasched serve 'old-head:77' leads (epoch 3" in out
        assert "refused: 0010 is not online-safe" in out.splitlines()[-1]
        plan = as_json(make_runner(url)("db", "upgrade", "--plan", "--json"))
        assert plan["refused"] and plan["at"] == "0009" and len(plan["running"]) == 1
        assert [(s["revision"], s["online_safe"]) for s in plan["pending"]][:2] == [("0010", False), ("0011", True)]
        assert current_revision(db.engine) == "0009"
    finally:
        db.dispose()


def test_a_migration_that_is_not_online_safe_is_refused_while_an_older_replica_leads(tmp_path: Path) -> None:
    url, db = _store(tmp_path, "0009", lease_s=60)
    run = make_runner(url)
    try:
        refused = run("db", "upgrade")
        assert refused.exit_code == 1
        assert "refused: 0010 is not online-safe" in refused.stderr and "old-head:77" in refused.stderr
        assert "0010  NOT online-safe" in refused.stdout  # the plan, on stdout
        assert current_revision(db.engine) == "0009"
        _set_lease(db, -1)  # the older replica stopped (its lease released)
        done = as_json(run("db", "upgrade", "--json"))
        assert (done["from"], done["to"], done["running"]) == ("0009", head_revision(), [])
        assert [s["revision"] for s in done["applied"]][0] == "0010"
    finally:
        db.dispose()


def test_offline_ok_applies_it_anyway(tmp_path: Path) -> None:
    url, db = _store(tmp_path, "0009", lease_s=60)
    try:
        out = ok(make_runner(url)("db", "upgrade", "--offline-ok"))
        assert out.rstrip().endswith(f"0009 -> {head_revision()}")
        assert "applied 0010 (NOT online-safe)" in out
    finally:
        db.dispose()


def test_online_safe_migrations_are_applied_while_an_older_replica_leads(tmp_path: Path) -> None:
    url, db = _store(tmp_path, "0015", lease_s=60)
    run = make_runner(url)
    try:
        plan = ok(run("db", "upgrade", "--plan"))
        assert plan.rstrip().endswith("db upgrade would apply them: every one is online-safe")
        out = ok(run("db", "upgrade"))
        assert "applied 0016 (online-safe)" in out and out.rstrip().endswith(f"0015 -> {head_revision()}")
        assert ok(run("db", "upgrade", "--plan")).rstrip().endswith("nothing to apply")
    finally:
        db.dispose()


def test_a_store_of_a_newer_version_is_refused_in_one_line(tmp_path: Path) -> None:
    url, db = _store(tmp_path, "head", lease_s=None)
    try:
        with db.engine.begin() as connection:
            connection.execute(text("UPDATE alembic_version SET version_num = '0099'"))
        for args in (("db", "upgrade"), ("db", "upgrade", "--plan"), ("list",)):
            result = make_runner(url)(*args)
            assert result.exit_code == 1, (args, result.output)
            assert "the store is at schema 0099, which this version does not ship" in result.stderr
            assert "Traceback" not in result.output
    finally:
        db.dispose()
