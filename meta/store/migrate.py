"""Schema migrations with Alembic, run programmatically (``metasched db upgrade``)."""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

from meta.store.schema_plan import SchemaBehind, pending, read_lease

MIGRATIONS_DIR = Path(__file__).resolve().parent / "migrations"
# an arbitrary constant: all metasched processes serialise schema upgrades on this lock
_PG_ADVISORY_LOCK = 0x6D657461


def alembic_config(url: str) -> Config:
    """alembic_config points Alembic at the packaged migrations and the given database."""
    config = Config()
    config.set_main_option("script_location", str(MIGRATIONS_DIR))
    config.set_main_option("sqlalchemy.url", url.replace("%", "%%"))
    return config


def head_revision() -> str:
    """head_revision is the newest migration shipped with this version."""
    script = ScriptDirectory.from_config(alembic_config("sqlite://"))
    head = script.get_current_head()
    assert head is not None
    return head


def current_revision(engine: Engine) -> str | None:
    """current_revision is the migration the database is at (None when empty)."""
    with engine.connect() as connection:
        return MigrationContext.configure(connection).get_current_revision()


def upgrade(engine: Engine, url: str, guard: Callable[[str | None], None] | None = None) -> tuple[str | None, str]:
    """upgrade brings the schema to head, serialised across processes; returns (before, after).

    ``guard`` is called with the revision the store is at once the upgrade holds the lock, before
    anything is applied: it raises to refuse (``db upgrade``'s rolling-upgrade check).
    """
    config = alembic_config(url)
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _PG_ADVISORY_LOCK})
            try:
                before = MigrationContext.configure(connection).get_current_revision()
                if guard is not None:
                    guard(before)
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                connection.commit()
            finally:
                connection.rollback()  # a refused or failed upgrade leaves its transaction open
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_ADVISORY_LOCK})
                connection.commit()
        return before, head_revision()
    before = current_revision(engine)
    if guard is not None:
        guard(before)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return before, head_revision()


def ensure_schema(engine: Engine, url: str) -> None:
    """ensure_schema makes an empty store's schema and leaves a store at head as it is (one cheap read).

    A store behind this version is migrated here only on SQLite while no daemon leads it (one
    host, nothing else runs on it: the embedded store upgrades as it always did); otherwise it
    raises SchemaBehind — `metasched db upgrade` decides, with the rolling-upgrade check, whether
    older replicas may still run beside the migrations (docs/upgrades.md). A store at a revision
    this version does not ship raises SchemaNewer. The engine holds no connection after a raise.
    """
    current = current_revision(engine)
    if current == head_revision():
        return
    if current is None:
        upgrade(engine, url)
        return
    try:
        steps = pending(current)
        if engine.dialect.name == "sqlite" and not read_lease(engine).fresh:
            upgrade(engine, url)
            return
    except Exception:
        engine.dispose()
        raise
    engine.dispose()
    raise SchemaBehind(current, head_revision(), steps)
