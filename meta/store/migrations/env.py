"""Alembic environment: uses the connection handed in by meta.store.migrate, or the URL."""

from __future__ import annotations

from alembic import context
from sqlalchemy import create_engine

from meta.store.models import Base

target_metadata = Base.metadata


def run_migrations() -> None:
    """run_migrations runs online migrations on the provided connection or a new engine."""
    connection = context.config.attributes.get("connection")
    if connection is not None:
        context.configure(connection=connection, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()
        return
    engine = create_engine(context.config.get_main_option("sqlalchemy.url"))
    with engine.begin() as conn:
        context.configure(connection=conn, target_metadata=target_metadata, render_as_batch=True)
        with context.begin_transaction():
            context.run_migrations()


run_migrations()
