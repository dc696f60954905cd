"""metasched doctor, the store: reachable and at head, probed read-only (nothing is created or migrated)."""

from __future__ import annotations

from pathlib import Path

from meta.serve.doctor.check import Status
from meta.serve.doctor.store import StoreState, probe_store, store_check
from meta.store.db import Database
from meta.store.migrate import head_revision, upgrade

HEAD = head_revision()


def test_a_migrated_sqlite_store_is_at_head(tmp_path: Path) -> None:
    url = f"sqlite:///{tmp_path / 'ms.sqlite'}"
    database = Database(url)
    upgrade(database.engine, url)
    database.dispose()
    state = probe_store(url)
    assert state.revision == HEAD and state.error is None and state.clock is None  # SQLite: this host's clock
    assert store_check(state).status is Status.OK


def test_a_missing_sqlite_file_fails_and_is_not_created(tmp_path: Path) -> None:
    path = tmp_path / "none" / "ms.sqlite"
    check = store_check(probe_store(f"sqlite:///{path}"))
    assert check.status is Status.FAIL and str(path) in check.message and "db upgrade" in check.message
    assert not path.exists() and not path.parent.exists()


def test_an_empty_store_fails_asking_for_the_upgrade(tmp_path: Path) -> None:
    path = tmp_path / "empty.sqlite"
    path.touch()
    check = store_check(probe_store(f"sqlite:///{path}"))
    assert check.status is Status.FAIL and "empty" in check.message and "metasched db upgrade" in check.message
    assert path.stat().st_size == 0  # read-only: nothing written


def test_a_file_that_is_no_database_fails(tmp_path: Path) -> None:
    path = tmp_path / "junk.sqlite"
    path.write_bytes(b"not a database" * 200)
    check = store_check(probe_store(f"sqlite:///{path}"))
    assert check.status is Status.FAIL and "cannot reach the store" in check.message


def test_an_unreachable_postgresql_fails_without_its_password() -> None:
    check = store_check(probe_store("postgresql+psycopg://metasched:secretpw@127.0.0.1:1/nothing"))
    assert check.status is Status.FAIL and "cannot reach the store" in check.message
    assert "secretpw" not in check.message and "127.0.0.1:1" in check.message


def test_behind_or_ahead_of_this_version_fails() -> None:
    behind = store_check(StoreState("sqlite:///x", revision="0001", head=HEAD, known=True))
    assert behind.status is Status.FAIL and "metasched db upgrade" in behind.message
    ahead = store_check(StoreState("sqlite:///x", revision="9999_future", head=HEAD, known=False))
    assert ahead.status is Status.FAIL and "newer metasched" in ahead.message
