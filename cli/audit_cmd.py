"""``metasched audit``: policy decisions (preemptions, evictions) and overrides (cancel, retry, tenants)."""

from __future__ import annotations

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table, short_time


@click.command(name="audit")
@click.option("--since", default=None, help="Only events at or after this ISO time.")
@click.option("--limit", default=200, show_default=True, type=click.IntRange(1, 100_000))
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def audit_cmd(state: CliState, since: str | None, limit: int, as_json: bool) -> None:
    """Show the audit trail, newest first (a tenant member sees only its tenant's events)."""
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
