"""Database administration: ``metasched db upgrade`` and ``metasched db current``."""

from __future__ import annotations

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json
from meta.store.db import Database, redact, resolve_url
from meta.store.migrate import current_revision, head_revision, upgrade


@click.group()
def db() -> None:
    """Manage the metasched database schema."""


@db.command(name="upgrade")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def db_upgrade(state: CliState, as_json: bool) -> None:
    """Apply migrations up to the newest schema (safe to run concurrently and repeatedly)."""
    url = resolve_url(state.db_url)
    database = Database(url)
    before, after = upgrade(database.engine, url)
    if as_json:
        echo_json({"database": redact(url), "from": before, "to": after})
        return
    click.echo(f"{redact(url)}: {before or 'empty'} -> {after}")


@db.command(name="current")
@pass_state
@handle_errors
def db_current(state: CliState) -> None:
    """Show the schema revision of the database and the newest one this version ships."""
    url = resolve_url(state.db_url)
    revision = current_revision(Database(url).engine)
    click.echo(f"{redact(url)}: at {revision or 'empty'}, head {head_revision()}")
