"""``metasched checkpoint report|list``: the checkpoint registry from inside and outside a job."""

from __future__ import annotations

import os
import stat

import click

from cli.attempt_env import attempt_identity, attempt_option, attempt_secret, token_option
from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table, short_time

NODE_MTBF_S = 30 * 24 * 3600.0


@click.group(name="checkpoint")
def checkpoint_group() -> None:
    """Report and inspect training checkpoints."""


@checkpoint_group.command(name="report")
@click.option("--step", type=click.IntRange(0), required=True, help="Training step of the checkpoint.")
@click.option("--path", "path", required=True, help="Where the checkpoint was written.")
@click.option("--duration", type=click.FloatRange(0), default=None, help="Seconds the checkpoint took to write.")
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
    view = state.backend(job_side=True).report_checkpoint(
        attempt_id, fencing_token, step=step, path=path, size_bytes=_regular_file_size(path), duration_s=duration,
        secret=attempt_secret(),
    )
    if as_json:
        echo_json(view)
        return
    click.echo(f"checkpoint step {view['step']} recorded for task {view['task_id'][:8]} at {view['path']}")


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
    "--node-mtbf", default=NODE_MTBF_S, show_default=True, type=click.FloatRange(0, 1e10, min_open=True),
    help="Node MTBF (s) for Young/Daly.",
)
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def list_checkpoints(state: CliState, job: str, node_mtbf: float, as_json: bool) -> None:
    """List a job's checkpoints and the recommended checkpoint interval (Young/Daly)."""
    result = state.backend().checkpoints(job, node_mtbf_s=node_mtbf)
    if as_json:
        echo_json(result)
        return
    echo_table(
        ["STEP", "PATH", "BYTES", "WRITE S", "ATTEMPT", "AT"],
        [
            [v["step"], v["path"], v["size_bytes"] or "-", v["duration_s"] or "-", v["attempt_id"][:8], short_time(v["at"])]
            for v in result["checkpoints"]
        ],
    )
    interval = result["recommended_interval_s"]
    click.echo(f"recommended interval (Young/Daly, {result['workers']} node(s)): {interval / 60:.1f} min")
