"""``metasched audit``: policy decisions, overrides and refusals; ``audit prune``: an admin removes old lines.

The audit is append-only; ``audit prune --before AGE --yes`` is its one exception: admins only,
lines at least a day old, and the prune leaves a line saying who pruned what.
"""

from __future__ import annotations

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table, short_time
from meta.model.errors import InvalidRequest


@click.group(name="audit", invoke_without_command=True)
@click.option("--since", default=None, help="Only events at or after this ISO time.")
@click.option("--limit", default=200, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True)
@click.pass_context
def audit_cmd(ctx: click.Context, since: str | None, limit: int, as_json: bool) -> None:
    """Show the audit trail, newest first (a tenant member sees only its tenant's events)."""
    if ctx.invoked_subcommand is None:
        ctx.invoke(_show, since=since, limit=limit, as_json=as_json)


@pass_state
@handle_errors
def _show(state: CliState, since: str | None, limit: int, as_json: bool) -> None:
    """_show prints the audit lines the caller may see."""
    events = state.backend().audit(since=since, limit=limit)
    if as_json:
        echo_json(events)
        return
    echo_table(
        ["AT", "ACTOR", "ACTION", "TENANT", "SUBJECT", "DETAIL"],
        [
            [
                short_time(e["at"]),
                e["actor"],
                e["action"],
                e["tenant"] or "-",
                e["subject"][:12],
                ", ".join(f"{k}={v}" for k, v in e["detail"].items()),
            ]
            for e in events
        ],
    )


@audit_cmd.command(name="prune")
@click.option("--before", required=True, help="Delete lines older than this age (90d, 12h) or ISO time.")
@click.option(
    "--yes", is_flag=True, help="Confirm: the lines are deleted for good (the prune itself is audited)."
)
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def prune_cmd(state: CliState, before: str, yes: bool, as_json: bool) -> None:
    """Delete audit lines older than --before (admins only; at least a day old; needs --yes)."""
    if not yes:
        raise InvalidRequest("audit prune deletes audit lines for good: add --yes to confirm")
    result = state.backend().audit_prune(before=before, confirm=True)
    if as_json:
        echo_json(result)
        return
    click.echo(
        f"pruned {result['deleted']} audit lines older than {result['before']} (recorded as audit.prune)"
    )
