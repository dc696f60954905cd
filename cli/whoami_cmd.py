"""``metasched whoami``: the caller as the service sees it (user, uid, tenants, admin)."""

from __future__ import annotations

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json


@click.command(name="whoami")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def whoami(state: CliState, as_json: bool) -> None:
    """Show who the service takes you for: user, tenants (Slurm accounts) and whether you are an admin."""
    me = state.backend().whoami()
    if as_json:
        echo_json(me)
        return
    uid = f" (uid {me['uid']})" if me.get("uid") is not None else ""
    click.echo(f"user {me['user']}{uid}{'  admin' if me.get('admin') else ''}")
    click.echo(f"  tenants: {', '.join(me.get('accounts') or []) or '-'}  default: {me.get('default_account') or '-'}")
    if me.get("tenant"):
        click.echo(f"  acting for: {me['tenant']}")
