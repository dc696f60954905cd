"""Database administration: ``metasched db upgrade``, ``metasched db current`` and ``metasched db site``."""

from __future__ import annotations

import click

from cli.context import CliState, pass_state
from cli.errors import EXIT_ERROR, EXIT_USAGE, fail, handle_errors
from cli.output import echo_json
from meta.store.db import Database, redact, resolve_url
from meta.store.migrate import current_revision, head_revision, upgrade
from meta.store.site import SiteInUse, ensure_site_id, renew_site_id, stored_site_id


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
    site = ensure_site_id(database)  # a new store gets its site id now, before any daemon runs
    if as_json:
        echo_json({"database": redact(url), "from": before, "to": after, "site": site})
        return
    click.echo(f"{redact(url)}: {before or 'empty'} -> {after}")


@db.command(name="current")
@pass_state
@handle_errors
def db_current(state: CliState) -> None:
    """Show the schema revision of the database and the newest one this version ships."""
    url = resolve_url(state.db_url)
    database = Database(url)
    revision = current_revision(database.engine)
    site = stored_site_id(database) or "none yet"
    click.echo(f"{redact(url)}: at {revision or 'empty'}, head {head_revision()}, site {site}")


@db.command(name="site")
@click.option("--renew", is_flag=True, help="Draw a new site id (a store copied from another site's).")
@click.option("--yes", is_flag=True, help="Really renew (without it, --renew changes nothing).")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def db_site(state: CliState, renew: bool, yes: bool, as_json: bool) -> None:
    """Show the store's site id, which every Slurm job tag names; --renew --yes draws a new one."""
    database = Database(resolve_url(state.db_url))
    if renew and not yes:
        fail("--renew changes which Slurm jobs this store follows: add --yes (with every serve stopped)", EXIT_USAGE)
    if renew:
        try:
            site = renew_site_id(database)
        except SiteInUse as exc:
            fail(f"cannot renew the site id: {exc}", EXIT_ERROR)
            raise  # unreachable: fail exits
    else:
        site = stored_site_id(database) or ensure_site_id(database)
    if as_json:
        echo_json({"site": site, "renewed": renew})
        return
    click.echo(site)
