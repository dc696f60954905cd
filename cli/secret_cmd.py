"""``metasched secret set|list|delete``: tenant secrets by name; values are never printed."""

from __future__ import annotations

import sys

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json
from meta.model.errors import Forbidden, InvalidRequest, NotFound
from tenants.secrets import DEFAULT_ROOT, delete_secret, secret_names, set_secret

root_option = click.option("--root", default=DEFAULT_ROOT, show_default=True, help="Secrets directory.")


@click.group(name="secret")
def secret_group() -> None:
    """Manage tenant secrets (jobs list secret names; values are read on the node at start)."""


def _check(state: CliState, tenant: str) -> None:
    if not state.principal().may_access(tenant):
        raise Forbidden(f"you act for tenant {state.principal().tenant!r}, not {tenant!r}")


@secret_group.command(name="set")
@click.argument("tenant")
@click.argument("name")
@root_option
@pass_state
@handle_errors
def set_cmd(state: CliState, tenant: str, name: str, root: str) -> None:
    """Set TENANT's secret NAME from standard input (never from the command line: it would be in ps)."""
    _check(state, tenant)
    value = sys.stdin.read()
    if not value:
        raise InvalidRequest("no value on standard input")
    set_secret(root, tenant, name, value.rstrip("\n"))
    click.echo(f"secret {name} set for {tenant}")


@secret_group.command(name="list")
@click.argument("tenant")
@root_option
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def list_cmd(state: CliState, tenant: str, root: str, as_json: bool) -> None:
    """List TENANT's secret names."""
    _check(state, tenant)
    names = secret_names(root, tenant)
    if as_json:
        echo_json(names)
        return
    click.echo("\n".join(names) or "(none)")


@secret_group.command(name="delete")
@click.argument("tenant")
@click.argument("name")
@root_option
@pass_state
@handle_errors
def delete_cmd(state: CliState, tenant: str, name: str, root: str) -> None:
    """Delete TENANT's secret NAME."""
    _check(state, tenant)
    if not delete_secret(root, tenant, name):
        raise NotFound(f"secret {name} of {tenant} not found")
    click.echo(f"secret {name} deleted for {tenant}")
