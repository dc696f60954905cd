"""``metasched checkpoint report|list``: the checkpoint registry from inside and outside a job."""

from __future__ import annotations

import os
import stat

import click
from sqlalchemy import select

from checkpoint import registry
from checkpoint.policy import recommend_interval_s
from cli.attempt_env import attempt_identity, attempt_option, token_option
from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table, short_time
from meta.store.models import Task


@click.group(name="checkpoint")
def checkpoint_group() -> None:
    """Report and inspect training checkpoints."""


@checkpoint_group.command(name="report")
@click.option("--step", type=click.IntRange(0), required=True, help="Training step of the checkpoint.")
@click.option("--path", "path", required=True, help="Where the checkpoint was written.")
@click.option("--duration", type=float, default=None, help="Seconds the checkpoint took to write.")
@attempt_option
@token_option
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def report(
    state: CliState,
    step: int,
    path: str,
    duration: float | None,
    attempt: str | None,
    token: int | None,
    as_json: bool,
) -> None:
    """Record a checkpoint of the running attempt (fenced: a stale attempt is refused)."""
    attempt_id, fencing_token = attempt_identity(attempt, token)
    with state.service().db.session() as session:
        view = registry.report(
            session,
            attempt_id,
            fencing_token,
            step,
            path,
            size_bytes=_regular_file_size(path),
            duration_s=duration,
            actor=state.principal().name,
        )
    if as_json:
        echo_json(view.__dict__)
        return
    click.echo(f"checkpoint step {view.step} recorded for task {view.task_id[:8]} at {view.path}")


def _regular_file_size(path: str) -> int | None:
    """_regular_file_size is the size of a regular file at ``path``; None for a link, a folder or nothing."""
    try:
        info = os.lstat(path)  # lstat: a link's target is not the checkpoint, and may be anyone's file
    except OSError:
        return None
    return info.st_size if stat.S_ISREG(info.st_mode) else None


@checkpoint_group.command(name="list")
@click.argument("job")
@click.option(
    "--node-mtbf", default=30 * 24 * 3600.0, show_default=True, help="Node MTBF (s) for Young/Daly."
)
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def list_checkpoints(state: CliState, job: str, node_mtbf: float, as_json: bool) -> None:
    """List a job's checkpoints and the recommended checkpoint interval (Young/Daly)."""
    service = state.service()
    status = service.status(job, principal=state.principal())
    nodes = int(status.spec.get("workers", 1))
    with service.db.session() as session:
        tasks = list(session.scalars(select(Task.id).where(Task.job_id == status.summary.id)))
        views = [v for t in tasks for v in registry.history(session, t)]
    interval = recommend_interval_s([v.duration_s or 0.0 for v in views], node_mtbf, nodes)
    if as_json:
        echo_json({"checkpoints": [v.__dict__ for v in views], "recommended_interval_s": interval})
        return
    echo_table(
        ["STEP", "PATH", "BYTES", "WRITE S", "ATTEMPT", "AT"],
        [
            [
                v.step,
                v.path,
                v.size_bytes or "-",
                v.duration_s or "-",
                v.attempt_id[:8],
                short_time(v.at.isoformat()),
            ]
            for v in views
        ],
    )
    click.echo(f"recommended interval (Young/Daly, {nodes} node(s)): {interval / 60:.1f} min")
