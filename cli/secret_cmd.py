"""``metasched secret set|list|delete``: tenant secrets by name; values are never printed.

Set and delete are audited in the store (actor, tenant and secret name: never the value). The
file change happens inside the audit row's transaction, so a refused or failed change leaves no
row, and a change is never made without its row being written too.
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Iterator

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json
from meta.model.errors import Forbidden, InvalidRequest, NotFound
from meta.store import audit
from tenants.names import check_secret_name, check_tenant_name
from tenants.secrets import DEFAULT_ROOT, delete_secret, secret_names, set_secret

root_option = click.option("--root", default=DEFAULT_ROOT, show_default=True, help="Secrets directory.")


@click.group(name="secret")
def secret_group() -> None:
    """Manage tenant secrets (jobs list secret names; values are read on the node at start)."""


def _check(state: CliState, tenant: str, name: str | None = None) -> None:
    """_check refuses bad names (exit 2) and a tenant member acting for another tenant (exit 1)."""
    check_tenant_name(tenant)
    if name is not None:
        check_secret_name(name)
    if not state.principal().may_access(tenant):
        raise Forbidden(f"you act for tenant {state.principal().tenant!r}, not {tenant!r}")


@contextlib.contextmanager
def _audited(state: CliState, action: str, tenant: str, name: str) -> Iterator[None]:
    """_audited runs one secret change in a store transaction that records it (the name, never the value)."""
    with state.service().db.session() as session:
        yield  # the change; when it raises, nothing is recorded and the transaction rolls back
        audit.record(session, state.principal().name, action, f"{tenant}/{name}", tenant=tenant, name=name)


@secret_group.command(name="set")
@click.argument("tenant")
@click.argument("name")
@root_option
@pass_state
@handle_errors
def set_cmd(state: CliState, tenant: str, name: str, root: str) -> None:
    """Set TENANT's secret NAME from standard input (never from the command line: it would be in ps)."""
    _check(state, tenant, name)
    value = sys.stdin.read()
    if not value:
        raise InvalidRequest("no value on standard input")
    with _audited(state, "secret.set", tenant, name):
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
    _check(state, tenant, name)
    with _audited(state, "secret.delete", tenant, name):
        if not delete_secret(root, tenant, name):
            raise NotFound(f"secret {name} of {tenant} not found")
    click.echo(f"secret {name} deleted for {tenant}")
