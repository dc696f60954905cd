"""``metasched cluster drain|resume|list``: an admin takes a Slurm cluster out of metasched's placements, and back.

A drained cluster gets no new work from metasched at the daemon's next period; what runs there
already runs to its end (nothing is stopped, Slurm's own state is not touched). Admins only;
every drain and resume is audited (``cluster.drain``, ``cluster.resume``).
"""

from __future__ import annotations

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table, short_time


@click.group(name="cluster")
def cluster_group() -> None:
    """Drain a Slurm cluster from metasched's point of view (no new placements, running work finishes), or resume it."""


@cluster_group.command(name="drain")
@click.argument("name")
@click.option("--reason", default=None, help="Why (at most 200 printable characters); shown by `cluster list`.")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def drain_cmd(state: CliState, name: str, reason: str | None, as_json: bool) -> None:
    """Give cluster NAME no new work; jobs running there finish (admins; again: keeps the first drain, takes --reason)."""
    found = state.backend().drain_cluster(name, reason=reason)
    if as_json:
        echo_json(found)
        return
    since = "" if found["new"] else f" (since {short_time(found['drained_at'])} by {found['drained_by']})"
    click.echo(f"cluster {found['cluster']} drained{since}: no new placements; running work finishes")
    if found.get("known") is False:
        click.echo(f"note: no node of the last inventory is on cluster {found['cluster']}; the drain applies "
                   "once metasched schedules on a cluster of that name", err=True)


@cluster_group.command(name="resume")
@click.argument("name")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def resume_cmd(state: CliState, name: str, as_json: bool) -> None:
    """Let cluster NAME take new work again (admins; a cluster that is not drained is left as it is)."""
    found = state.backend().resume_cluster(name)
    if as_json:
        echo_json(found)
        return
    if found["was_drained"]:
        click.echo(f"cluster {found['cluster']} resumed: it takes new work at the next period")
    else:
        click.echo(f"cluster {found['cluster']} was not drained: nothing changed")


@cluster_group.command(name="list")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def list_cmd(state: CliState, as_json: bool) -> None:
    """List the drained clusters with their reason, who drained them and since when (admins)."""
    found = state.backend().cluster_drains()
    if as_json:
        echo_json(found)
        return
    echo_table(["CLUSTER", "SINCE", "BY", "REASON"],
               [[d["cluster"], short_time(d["drained_at"]), d["drained_by"], d["reason"] or "-"] for d in found])
