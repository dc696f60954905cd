"""Schema migrations with Alembic, run programmatically (``metasched db upgrade``)."""

from __future__ import annotations

from pathlib import Path

from alembic import command
from alembic.config import Config
from alembic.runtime.migration import MigrationContext
from alembic.script import ScriptDirectory
from sqlalchemy import Engine, text

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


def upgrade(engine: Engine, url: str) -> tuple[str | None, str]:
    """upgrade brings the schema to head, serialised across processes; returns (before, after)."""
    config = alembic_config(url)
    if engine.dialect.name == "postgresql":
        with engine.connect() as connection:
            connection.execute(text("SELECT pg_advisory_lock(:key)"), {"key": _PG_ADVISORY_LOCK})
            try:
                before = MigrationContext.configure(connection).get_current_revision()
                config.attributes["connection"] = connection
                command.upgrade(config, "head")
                connection.commit()
            finally:
                connection.execute(text("SELECT pg_advisory_unlock(:key)"), {"key": _PG_ADVISORY_LOCK})
                connection.commit()
        return before, head_revision()
    before = current_revision(engine)
    with engine.begin() as connection:
        config.attributes["connection"] = connection
        command.upgrade(config, "head")
    return before, head_revision()


def ensure_schema(engine: Engine, url: str) -> None:
    """ensure_schema upgrades when the database is behind (cheap when it is already at head)."""
    if current_revision(engine) != head_revision():
        upgrade(engine, url)
