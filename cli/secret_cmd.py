"""``metasched secret set|list|delete``: tenant secrets by name; values are never printed.

Set and delete are audited by the service (actor, tenant and secret name: never the value).
The value is read from standard input, never from the command line (it would show in ``ps``).
"""

from __future__ import annotations

import sys

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json
from meta.model.errors import InvalidRequest

MAX_VALUE_BYTES = 1024 * 1024

root_option = click.option(
    "--root", default=None, help="Secrets directory, local mode (--db) only (default: /etc/metasched/secrets)."
)


@click.group(name="secret")
def secret_group() -> None:
    """Manage tenant secrets (jobs list secret names; values are read on the node at start)."""


@secret_group.command(name="set")
@click.argument("tenant")
@click.argument("name")
@root_option
@pass_state
@handle_errors
def set_cmd(state: CliState, tenant: str, name: str, root: str | None) -> None:
    """Set TENANT's secret NAME from standard input (never from the command line: it would be in ps)."""
    backend = state.backend(secrets_root=root)
    value = sys.stdin.read(MAX_VALUE_BYTES + 1)
    if not value:
        raise InvalidRequest("no value on standard input")
    if len(value) > MAX_VALUE_BYTES:
        raise InvalidRequest(f"a secret value is at most {MAX_VALUE_BYTES // 1024} KiB")
    backend.set_secret(tenant, name, value.rstrip("\n"))
    click.echo(f"secret {name} set for {tenant}")


@secret_group.command(name="list")
@click.argument("tenant")
@root_option
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def list_cmd(state: CliState, tenant: str, root: str | None, as_json: bool) -> None:
    """List TENANT's secret names."""
    names = state.backend(secrets_root=root).secret_names(tenant)
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
def delete_cmd(state: CliState, tenant: str, name: str, root: str | None) -> None:
    """Delete TENANT's secret NAME."""
    state.backend(secrets_root=root).delete_secret(tenant, name)
    click.echo(f"secret {name} deleted for {tenant}")


@secret_group.command(name="allow")
@click.argument("tenant")
@click.argument("name")
@click.argument("users", nargs=-1)
@click.option("--everyone", is_flag=True, help="Every member's job may read it (a new secret's default).")
@root_option
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def allow_cmd(
    state: CliState, tenant: str, name: str, users: tuple[str, ...], everyone: bool, root: str | None, as_json: bool
) -> None:  # fmt: skip
    """Let only the jobs of USERS read TENANT's secret NAME (coordinators and admins; --everyone undoes it)."""
    if bool(users) == everyone:
        raise InvalidRequest("give the users whose jobs may read the secret, or --everyone (not both)")
    backend = state.backend(secrets_root=root)
    answer = backend.allow_secret(tenant, name, list(users) or None, everyone=everyone)
    if as_json:
        echo_json(answer)
        return
    allowed = answer.get("users")
    who = "every member of " + tenant if allowed is None else ", ".join(allowed)
    click.echo(f"secret {name} of {tenant}: read by the jobs of {who}")
