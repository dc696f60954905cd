"""Database URL resolution, engines and sessions for PostgreSQL and the embedded SQLite file."""

from __future__ import annotations

import os
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

from sqlalchemy import Engine, create_engine, event
from sqlalchemy.engine import make_url
from sqlalchemy.exc import ArgumentError
from sqlalchemy.orm import Session, sessionmaker

from meta.store.private_files import opened_dir, write_private

ENV_VAR = "METASCHED_DB"
FILE_ENV_VAR = "METASCHED_DB_FILE"  # a file holding the URL: how jobs reach the store without secrets in scripts


class DatabaseURLError(ValueError):
    """DatabaseURLError is a --db / METASCHED_DB value that is not a usable database URL."""


def default_sqlite_path() -> Path:
    """default_sqlite_path is the embedded store in the XDG data dir (~/.local/share/metasched)."""
    base = os.environ.get("XDG_DATA_HOME") or str(Path.home() / ".local" / "share")
    return Path(base) / "metasched" / "metasched.sqlite"


def resolve_url(explicit: str | None = None) -> str:
    """resolve_url picks --db, then METASCHED_DB, then the file METASCHED_DB_FILE, then embedded SQLite."""
    url = explicit or os.environ.get(ENV_VAR) or _url_from_file(os.environ.get(FILE_ENV_VAR))
    if not url:
        return f"sqlite:///{default_sqlite_path()}"
    if url.startswith("postgresql://") or url.startswith("postgres://"):
        # psycopg 3 is the driver we ship; plain postgresql:// would pick psycopg2
        url = "postgresql+psycopg://" + url.split("://", 1)[1]
    try:
        parsed = make_url(url)
    except (ArgumentError, ValueError):  # ValueError: a port that is not a number
        # never echo the value: a URL carries its password, and errors reach logs
        raise DatabaseURLError(
            "not a database URL: use postgresql+psycopg://user:password@host/db or sqlite:///path"
        ) from None
    if parsed.get_backend_name() not in {"sqlite", "postgresql"}:
        raise DatabaseURLError(f"unsupported database {parsed.get_backend_name()!r}: use postgresql or sqlite")
    return url


def _url_from_file(path: str | None) -> str | None:
    """_url_from_file reads a database URL from a file (first non-empty line)."""
    if not path:
        return None
    try:
        text = Path(path).read_text(encoding="utf-8")
    except OSError as exc:
        raise DatabaseURLError(f"cannot read {FILE_ENV_VAR}={path}: {exc.strerror}") from None
    lines = [line.strip() for line in text.splitlines() if line.strip()]
    if not lines:
        raise DatabaseURLError(f"{FILE_ENV_VAR}={path} is empty")
    return lines[0]


def write_url_file(url: str, path: Path) -> Path:
    """write_url_file stores a database URL in a file only its owner can read (mode 0600).

    The file is written under a fresh temp name (O_EXCL|O_NOFOLLOW) and renamed over ``path``:
    a link planted at ``path`` is replaced, never written through.
    """
    with opened_dir(path.parent) as folder:
        write_private(folder, path.name, url + "\n")
    return path


def redact(url: str) -> str:
    """redact hides the password of a URL so it can be logged or printed."""
    try:
        return make_url(url).render_as_string(hide_password=True)
    except ArgumentError:
        return "<invalid url>"


def _sqlite_pragmas(dbapi_connection: Any, _record: Any) -> None:
    cursor = dbapi_connection.cursor()
    # WAL lets readers run beside one writer; busy_timeout makes writers queue instead of failing
    cursor.execute("PRAGMA journal_mode=WAL")
    cursor.execute("PRAGMA foreign_keys=ON")
    cursor.execute("PRAGMA busy_timeout=30000")
    cursor.execute("PRAGMA synchronous=NORMAL")
    cursor.close()


def make_engine(url: str) -> Engine:
    """make_engine builds an engine; for SQLite it creates the directory and sets safe pragmas."""
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite":
        if parsed.database and parsed.database != ":memory:":
            create_sqlite_file(Path(parsed.database).expanduser())
        engine = create_engine(url, connect_args={"timeout": 30})
        event.listen(engine, "connect", _sqlite_pragmas)
        # pysqlite's own BEGIN handling defers locks; take the write lock up front instead
        event.listen(engine, "begin", lambda conn: conn.exec_driver_sql("BEGIN IMMEDIATE"))
        engine.dialect._metasched_sqlite = True  # type: ignore[attr-defined]
        return _sqlite_autocommit_off(engine)
    return create_engine(url, pool_pre_ping=True, pool_size=5, max_overflow=5)


def create_sqlite_file(path: Path) -> None:
    """create_sqlite_file makes a missing store file 0600 (and a missing folder 0700): the store is the service's.

    SQLite would create it with the umask (0644 in a 0755 folder, issue 22, S11); its -wal and -shm
    files take the database file's mode. An existing file or folder is left as its owner made it.
    """
    path.parent.mkdir(mode=0o700, parents=True, exist_ok=True)
    try:
        os.close(os.open(path, os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC, 0o600))
    except FileExistsError:
        pass  # an existing store (or a link an operator chose): SQLite opens it as before


def _sqlite_autocommit_off(engine: Engine) -> Engine:
    @event.listens_for(engine, "connect")
    def _no_implicit_transactions(dbapi_connection: Any, _record: Any) -> None:
        # let SQLAlchemy's "begin" event issue BEGIN IMMEDIATE itself
        dbapi_connection.isolation_level = None

    return engine


class Database:
    """Database owns one engine and hands out transactional sessions."""

    def __init__(self, url: str):
        self.url = url
        self.engine = make_engine(url)
        self._sessions = sessionmaker(self.engine, expire_on_commit=False)

    @property
    def dialect(self) -> str:
        """dialect is ``postgresql`` or ``sqlite``."""
        return self.engine.dialect.name

    @contextmanager
    def session(self) -> Iterator[Session]:
        """session yields a session inside one transaction: commit on success, rollback on error."""
        with self._sessions() as session, session.begin():
            yield session

    def dispose(self) -> None:
        """dispose closes the pool (after fork or at exit)."""
        self.engine.dispose()
