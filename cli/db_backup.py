"""Backups of the store, for ``metasched db backup`` and ``db restore`` (docs/operations.md, "Backup and restore").

- PostgreSQL: ``pg_dump --format=custom`` (one consistent snapshot, taken while ``serve`` runs)
  and ``pg_restore --single-transaction`` into an *empty* database (all of it or nothing).
  Both run as argv lists; the password goes in ``PGPASSWORD``, never on a command line.
- SQLite: the online backup API of Python's ``sqlite3`` (what ``sqlite3 .backup`` does), never a
  copy of the file: a store in WAL mode keeps committed pages in ``-wal`` until a checkpoint.

A backup file is written 0600 under a temporary name and linked into place at the end, so a
failed backup leaves nothing behind and an existing file is never overwritten. Nothing here
reads the store's tables (``cli/db_cmd.py`` does, through ``meta.store``).
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sqlite3
import subprocess
from collections.abc import Iterator
from pathlib import Path

from sqlalchemy import create_engine, inspect
from sqlalchemy.engine import URL, make_url

from meta.model.errors import MetaschedError

PG_DUMP_FORMAT = "pg_dump custom"
SQLITE_FORMAT = "sqlite"
SQLITE_MAGIC = b"SQLite format 3\x00"
PG_MAGIC = b"PGDMP"  # the first bytes of a pg_dump custom-format archive
_LOCK_WAIT_MS = 60_000  # pg_dump waits this long for a table lock (a migration holding one) before failing


class BackupError(MetaschedError):
    """BackupError: a backup or restore that could not be done, said in one line (exit 1)."""


def backend(url: str) -> str:
    """backend is ``postgresql`` or ``sqlite``."""
    return make_url(url).get_backend_name()


def sqlite_path(url: str) -> Path:
    """sqlite_path is the store file a ``sqlite:///path`` URL names."""
    database = make_url(url).database
    if not database or database == ":memory:":
        raise BackupError("a SQLite store in memory has nothing to back up: name a file (sqlite:///path)")
    return Path(database).expanduser()


# --- files -------------------------------------------------------------------------------------


def check_new_file(dest: Path) -> None:
    """check_new_file refuses a backup file that exists or whose folder does not."""
    if dest.exists() or dest.is_symlink():
        raise BackupError(f"{dest} exists: a backup never overwrites a file, choose a new name")
    if not dest.parent.is_dir():
        raise BackupError(f"{dest.parent} is not a folder")


@contextlib.contextmanager
def private_temp(dest: Path) -> Iterator[Path]:
    """private_temp is an empty 0600 file beside ``dest``, removed unless ``publish`` moved it into place."""
    temp = dest.with_name(f".{dest.name}.{os.getpid()}.partial")
    os.close(os.open(temp, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    try:
        yield temp
    finally:
        with contextlib.suppress(FileNotFoundError):
            temp.unlink()


def publish(temp: Path, dest: Path) -> None:
    """publish fsyncs ``temp`` and links it in as ``dest`` (refused if ``dest`` appeared meanwhile)."""
    with open(temp, "rb") as handle:
        os.fsync(handle.fileno())
    try:
        os.link(temp, dest)
    except FileExistsError:
        raise BackupError(f"{dest} appeared while the backup ran: kept the other file, nothing written") from None
    temp.unlink()


def file_format(path: Path) -> str:
    """file_format tells a pg_dump custom archive from a SQLite file by their first bytes."""
    try:
        with open(path, "rb") as handle:
            head = handle.read(len(SQLITE_MAGIC))
    except OSError as exc:
        raise BackupError(f"cannot read {path}: {exc.strerror}") from None
    if head.startswith(PG_MAGIC):
        return PG_DUMP_FORMAT
    if head == SQLITE_MAGIC:
        return SQLITE_FORMAT
    raise BackupError(f"{path} is neither a pg_dump custom archive nor a SQLite file")


# --- PostgreSQL ----------------------------------------------------------------------------------


def libpq(url: str) -> tuple[str, dict[str, str]]:
    """libpq is the connection URI for pg_dump/pg_restore (no password in it) and the environment holding the password."""
    parsed = make_url(url)
    env = {k: v for k, v in os.environ.items() if k != "PGPASSWORD"}
    if parsed.password is not None:
        env["PGPASSWORD"] = str(parsed.password)
    bare = URL.create("postgresql", username=parsed.username, host=parsed.host, port=parsed.port,
                      database=parsed.database, query=parsed.query)  # fmt: skip
    return bare.render_as_string(hide_password=False), env


def _tool(name: str) -> str:
    found = shutil.which(name)
    if found is None:
        raise BackupError(f"{name} not found: install PostgreSQL's client tools (postgresql-client, "
                          "the server's major version or newer)")  # fmt: skip
    return found


def _run(argv: list[str], env: dict[str, str], what: str) -> subprocess.CompletedProcess[str]:
    """_run runs one PostgreSQL tool; a failure is its first error line."""
    done = subprocess.run(argv, env=env, capture_output=True, text=True, stdin=subprocess.DEVNULL)
    if done.returncode != 0:
        lines = [line.strip() for line in done.stderr.splitlines() if line.strip()]
        errors = [line for line in lines if "error" in line.lower() or "fatal" in line.lower()] or lines
        raise BackupError(f"{what} failed (exit {done.returncode}): {errors[0] if errors else 'no message'}")
    return done


def pg_dump(url: str, dest: Path) -> None:
    """pg_dump writes a custom-format archive of the store to ``dest`` (one snapshot; serve may run)."""
    uri, env = libpq(url)
    with private_temp(dest) as temp:
        _run([_tool("pg_dump"), "--format=custom", f"--lock-wait-timeout={_LOCK_WAIT_MS}", "--file", str(temp),
              "--dbname", uri], env, "pg_dump")  # fmt: skip
        publish(temp, dest)


def pg_archive_tables(source: Path) -> list[str]:
    """pg_archive_tables lists the tables a custom-format archive holds (``pg_restore --list``)."""
    done = _run([_tool("pg_restore"), "--list", str(source)], dict(os.environ), "pg_restore --list")
    tables = []
    for line in done.stdout.splitlines():
        # "215; 1259 16390 TABLE public jobs metasched"
        parts = line.split()
        if not line.startswith(";") and len(parts) >= 6 and parts[3] == "TABLE" and parts[4] != "DATA":
            tables.append(parts[5])
    return tables


def pg_restore(url: str, source: Path) -> None:
    """pg_restore loads an archive into the (empty) database of ``url`` in one transaction, owned by its user."""
    uri, env = libpq(url)
    _run([_tool("pg_restore"), "--exit-on-error", "--single-transaction", "--no-owner", "--no-privileges",
          "--dbname", uri, str(source)], env, "pg_restore")  # fmt: skip


def pg_tables(url: str) -> list[str]:
    """pg_tables lists the tables of the target database's public schema (to refuse a non-empty one)."""
    engine = create_engine(url)
    try:
        return inspect(engine).get_table_names()
    finally:
        engine.dispose()


# --- SQLite --------------------------------------------------------------------------------------


def _connect(path: Path) -> sqlite3.Connection:
    connection = sqlite3.connect(path, timeout=30, isolation_level=None)
    connection.execute("PRAGMA busy_timeout=30000")
    return connection


def sqlite_copy(source: Path, dest: Path, *, journal: str) -> None:
    """sqlite_copy copies a SQLite database with the online backup API into a new 0600 file, checked.

    The copy is one consistent snapshot even while a daemon writes (WAL: readers do not block it).
    ``journal`` is the copy's journal mode: ``delete`` for a backup file, ``wal`` for a store.
    """
    if not source.is_file():
        raise BackupError(f"{source} is not a file")
    with private_temp(dest) as temp:
        src = _connect(source)
        out = _connect(temp)
        try:
            src.backup(out)  # all pages in one step, under one read transaction
            out.execute(f"PRAGMA journal_mode={journal}")
            verdict = out.execute("PRAGMA quick_check").fetchone()
        except sqlite3.DatabaseError as exc:
            raise BackupError(f"cannot copy {source}: {exc}") from None
        finally:
            out.close()
            src.close()
        if not verdict or verdict[0] != "ok":
            raise BackupError(f"the copy of {source} failed its check: {verdict[0] if verdict else 'no answer'}")
        publish(temp, dest)


def sqlite_tables(path: Path) -> list[str]:
    """sqlite_tables lists a SQLite file's tables (a missing file has none)."""
    if not path.exists():
        return []
    connection = sqlite3.connect(f"file:{path}?mode=ro", uri=True, timeout=30)
    try:
        return [row[0] for row in connection.execute("SELECT name FROM sqlite_master WHERE type = 'table'")]
    except sqlite3.DatabaseError as exc:
        raise BackupError(f"cannot read {path}: {exc}") from None
    finally:
        connection.close()


def sqlite_target_free(path: Path) -> None:
    """sqlite_target_free refuses a restore over an existing store (an empty file is fine, and replaced)."""
    for extra in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-journal")):
        if extra.exists() and extra.stat().st_size > 0:
            raise BackupError(f"{extra} exists: {path} is in use or was not closed cleanly, restore elsewhere")
    if path.exists() and path.stat().st_size > 0:
        raise BackupError(f"{path} exists and is not empty: restore into a new file (or move it away first)")
    with contextlib.suppress(FileNotFoundError):
        path.unlink()  # an empty file (an engine opened it): the restored copy takes its place
    for extra in (path.with_name(path.name + "-wal"), path.with_name(path.name + "-shm")):
        with contextlib.suppress(FileNotFoundError):
            extra.unlink()
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
