"""``metasched db backup``, ``db restore`` and ``db unknown-jobs`` (docs/operations.md, "Backup and restore").

- SQLite: a backup taken while another connection commits jobs is one consistent snapshot (every
  job with its task, SQLite's own check passes), a plain SQLite file (not WAL) readable only by
  its owner; restoring it gives a store with the same site and jobs; an existing backup file is
  never overwritten, a non-empty store never restored over, a file that is no backup refused —
  each in one line, exit 1.
- PostgreSQL (``pg_dump``/``pg_restore``): the same round trip into a new database; a database
  that is not empty, or a SQLite backup, is refused; the password never reaches an argv.
- ``unknown-jobs`` over the in-memory Slurm: which tagged jobs a store lacks, judged from their
  batch scripts, what serve would do with each, and ``--cancel`` cancelling only those whose task
  serve would run a second time.

The restore of an older copy on the real cluster is tests/integration/test_backup_restore.py.
"""

from __future__ import annotations

import os
import shutil
import sqlite3
import stat
import threading
import uuid
from collections.abc import Iterator
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from cli.db_backup import libpq
from cli.db_cmd import cancel_runs_again, find_unknown_jobs
from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.reconcile import ReconcileSettings
from meta.model.spec import spec_from_dict
from meta.service.api import Service
from meta.store.db import Database
from meta.store.migrate import upgrade
from meta.store.models import Attempt, Job, Task
from meta.store.site import ensure_site_id
from slurm_bridge import tags
from slurm_bridge.fake import FakeSlurm
from tests.cli.test_cli import as_json, make_runner
from tests.conftest import empty_pg_database, pg_url

EVAL = {"kind": "evaluation", "tenant": "tenant-a", "resources": {"cpus": 1, "memory": "1G"}, "command": "true"}


def _spec(name: str):  # noqa: ANN202 - a spec of the model
    return spec_from_dict({**EVAL, "name": name})


def _store(path: Path) -> Service:
    url = f"sqlite:///{path}"
    database = Database(url)
    upgrade(database.engine, url)
    ensure_site_id(database)
    return Service(database)


def _counts(database: Database) -> tuple[int, int]:
    with database.session() as session:
        return (session.scalar(select(func.count()).select_from(Job)) or 0,
                session.scalar(select(func.count()).select_from(Task)) or 0)  # fmt: skip


def _refused(result, words: str) -> None:  # noqa: ANN001 - click's Result
    assert result.exit_code == 1, result.output
    assert words in result.stderr and result.stderr.count("\n") == 1, result.stderr
    assert "Traceback" not in result.output


def test_sqlite_backup_while_jobs_are_committed_is_one_consistent_copy(tmp_path: Path) -> None:
    service = _store(tmp_path / "store.sqlite")
    for i in range(50):
        service.submit(_spec(f"before-{i}"))
    stop = threading.Event()
    written: list[int] = []

    def writer() -> None:  # another process's daemon would do the same: commit while the copy is taken
        while not stop.is_set():
            service.submit(_spec(f"during-{len(written)}"))
            written.append(1)

    thread = threading.Thread(target=writer)
    thread.start()
    try:
        run = make_runner(f"sqlite:///{tmp_path / 'store.sqlite'}")
        backup = tmp_path / "copy.sqlite"
        taken = as_json(run("db", "backup", str(backup), "--json"))
    finally:
        stop.set()
        thread.join()
    assert written, "nothing was committed while the backup ran"
    assert taken["format"] == "sqlite" and taken["bytes"] == backup.stat().st_size
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600
    with sqlite3.connect(backup) as check:
        assert check.execute("PRAGMA journal_mode").fetchone()[0] == "delete"  # one file, no -wal to forget
        assert check.execute("PRAGMA quick_check").fetchone()[0] == "ok"
        jobs, tasks = (check.execute(f"SELECT count(*) FROM {t}").fetchone()[0] for t in ("jobs", "tasks"))
    assert 50 <= jobs == tasks <= 50 + len(written), (jobs, tasks)  # a snapshot: no job without its task

    _refused(run("db", "backup", str(backup)), "exists: a backup never overwrites a file")
    restored_path = tmp_path / "restored" / "store.sqlite"
    restored_run = make_runner(f"sqlite:///{restored_path}")
    answer = as_json(restored_run("db", "restore", str(backup), "--no-slurm", "--json"))
    assert answer["site"] == taken["site"] and answer["jobs"] == jobs and answer["live_attempts"] == 0
    assert answer["unknown_jobs"] is None and answer["revision"] == answer["head"]
    assert stat.S_IMODE(restored_path.stat().st_mode) == 0o600
    assert stat.S_IMODE(restored_path.parent.stat().st_mode) == 0o700
    restored = Database(f"sqlite:///{restored_path}")
    try:
        assert _counts(restored) == (jobs, tasks)
    finally:
        restored.dispose()
    assert as_json(restored_run("list", "--json"))  # the restored store serves the API's reads
    _refused(restored_run("db", "restore", str(backup), "--no-slurm"), "exists and is not empty")
    (tmp_path / "not-a-backup").write_text("hello\n")
    _refused(restored_run("db", "restore", str(tmp_path / "not-a-backup")), "neither a pg_dump custom archive")
    service.db.dispose()


def test_backup_of_a_missing_sqlite_store_is_refused_and_creates_nothing(tmp_path: Path) -> None:
    run = make_runner(f"sqlite:///{tmp_path / 'none.sqlite'}")
    _refused(run("db", "backup", str(tmp_path / "b.sqlite")), "no store at")
    assert sorted(p.name for p in tmp_path.iterdir()) == []


def test_the_password_goes_to_the_environment_never_to_argv() -> None:
    uri, env = libpq("postgresql+psycopg://metasched:s3cret%40x@db.example:5433/ms?sslmode=require")
    assert "s3cret" not in uri and uri == "postgresql://metasched@db.example:5433/ms?sslmode=require"
    assert env["PGPASSWORD"] == "s3cret@x"


@pytest.fixture
def second_database() -> Iterator[str]:
    """second_database is a new, empty PostgreSQL database beside the test's own, dropped afterwards."""
    with empty_pg_database("cli_restore") as url:
        yield url


@pytest.mark.postgres
def test_postgres_backup_and_restore_into_an_empty_database(
    pg_service: Service, second_database: str, tmp_path: Path
) -> None:
    if shutil.which("pg_dump") is None or shutil.which("pg_restore") is None:
        pytest.skip("PostgreSQL's client tools (pg_dump, pg_restore) are not installed")
    for i in range(20):
        pg_service.submit(_spec(f"pg-{i}"))
    site = ensure_site_id(pg_service.db)
    backup = tmp_path / "store.dump"
    taken = as_json(make_runner(pg_url())("db", "backup", str(backup), "--json"))
    assert taken["format"] == "pg_dump custom" and taken["site"] == site
    assert stat.S_IMODE(backup.stat().st_mode) == 0o600 and backup.read_bytes()[:5] == b"PGDMP"
    run = make_runner(second_database)
    answer = as_json(run("db", "restore", str(backup), "--no-slurm", "--json"))
    assert answer["site"] == site and answer["jobs"] == 20 and answer["revision"] == answer["head"]
    restored = Database(second_database)
    try:
        assert _counts(restored) == (20, 20)
        with restored.engine.connect() as connection:  # the write-once triggers came back too
            triggers = connection.execute(text("SELECT count(*) FROM pg_trigger WHERE NOT tgisinternal")).scalar()
        assert triggers and triggers >= 4
    finally:
        restored.dispose()
    _refused(run("db", "restore", str(backup), "--no-slurm"), "is not empty")
    sqlite_copy = tmp_path / "copy.sqlite"
    _store(sqlite_copy).db.dispose()
    _refused(run("db", "restore", str(sqlite_copy), "--no-slurm"), "is a SQLite backup")


# --- unknown-jobs over the in-memory Slurm ------------------------------------------------------------


def _script(site: str, attempt: str, task: str, job: str) -> str:
    return (f"#!/bin/bash\n#SBATCH --job-name=eval\n#SBATCH --comment={tags.comment(site, attempt)}\n"
            f"#SBATCH --account=tenant-a\nexport METASCHED_ATTEMPT_ID={attempt}\n"
            f"export METASCHED_TASK_ID={task}\nexport METASCHED_JOB_NAME={job}\nexec bash -c true\n")  # fmt: skip


def _launched(fake: FakeSlurm, script: str, uid: int, running: bool = True) -> str:
    job_id = fake.submit(script)
    fake.jobs[job_id].uid = uid
    if running:
        fake.start(job_id)
    return str(job_id)


def test_unknown_jobs_says_what_serve_would_do_and_cancels_only_second_runs(tmp_path: Path) -> None:
    service = _store(tmp_path / "store.sqlite")
    site = ensure_site_id(service.db)
    fake = FakeSlurm()
    known = service.submit(_spec("known")).job
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder="unit", submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / "logs")),
                          reconcile=ReconcileSettings(unknown_window_s=0.0))  # fmt: skip
    daemon = Daemon(service.db, fake, config)
    try:
        for _ in range(20):
            daemon.period()
            if fake.active_jobs():
                break
    finally:
        daemon.close_launches()
    assert len(fake.active_jobs()) == 1  # the known job's attempt, which the store has
    waiting = service.submit(_spec("waiting")).job
    with service.db.session() as session:
        task = session.scalar(select(Task.id).where(Task.job_id == waiting.id))
        assert session.scalar(select(func.count()).select_from(Attempt).where(Attempt.job_id == waiting.id)) == 0
    daemon_uid = os.geteuid()
    beside = _launched(fake, _script(site, str(uuid.uuid4()), task, waiting.short_id), uid=2001)
    own = _launched(fake, _script(site, str(uuid.uuid4()), task, waiting.short_id), uid=daemon_uid, running=False)
    later = _launched(fake, _script(site, str(uuid.uuid4()), str(uuid.uuid4()), "jlater000"), uid=2001)
    unread = _launched(fake, _script(site, str(uuid.uuid4()), task, waiting.short_id), uid=2001)
    _launched(fake, _script("othersite000", str(uuid.uuid4()), task, waiting.short_id), uid=2001)
    ended = _launched(fake, _script(site, str(uuid.uuid4()), task, waiting.short_id), uid=2001)
    fake.finish(int(ended))

    def script_of(slurm_id: str) -> str | None:
        return None if slurm_id == unread else fake.jobs[int(slurm_id)].script

    found = {job.slurm_job_id: job for job in find_unknown_jobs(service.db, fake, script_of, daemon_uid=daemon_uid)}
    assert set(found) == {beside, own, later, unread}, found  # not the known, the other site's, nor the ended
    assert found[beside].in_store == "pending" and found[beside].runs_again and found[beside].job == waiting.short_id
    assert found[beside].serve_will == "run its task again beside it"
    assert found[own].serve_will == "cancel it (an orphan), then run its task again" and found[own].runs_again
    assert (found[later].in_store, found[later].runs_again, found[later].job) == ("absent", False, "jlater000")
    assert found[later].serve_will == "leave it running, untracked"
    assert (found[unread].in_store, found[unread].runs_again) == ("unknown", False)
    assert known.short_id not in {job.job for job in found.values()}

    marked = {job.slurm_job_id: job for job in cancel_runs_again(fake, list(found.values()))}
    assert {i for i, job in marked.items() if job.cancelled} == {beside, own}
    assert sorted(job_id for job_id, _ in fake.cancels) == sorted([beside, own])
    assert fake.jobs[int(later)].state == "RUNNING" and fake.jobs[int(beside)].state == "CANCELLED"
    service.db.dispose()
