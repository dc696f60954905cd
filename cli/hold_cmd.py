"""metasched hold / release JOB...: Slurm's ``scontrol hold`` / ``scontrol release`` for metasched jobs.

Each job is one request; a job that fails (not found, not allowed, no longer waiting) is named on
its own line and the others still go through, as scontrol does. The exit code is the worst one.
"""

from __future__ import annotations

import sys
from collections.abc import Callable
from typing import Any

import click

from cli.context import CliState, pass_state
from cli.errors import EXIT_ERROR, EXIT_OK, describe, handle_errors, one_line
from cli.output import echo_json


def _each(jobs: tuple[str, ...], change: Callable[[str], dict[str, Any]], done: str, as_json: bool) -> None:
    """_each applies ``change`` to every job, reporting each result or error on its own line."""
    code, results = EXIT_OK, []
    for job in jobs:
        try:
            result = change(job)
        except Exception as exc:  # noqa: BLE001 - mapped to one line like every CLI error
            message, exit_code = describe(exc) or (f"internal error: {type(exc).__name__}: {exc}", EXIT_ERROR)
            click.echo(f"metasched: error: {one_line(message)}", err=True)
            code = max(code, exit_code)
            continue
        results.append(result)
        if not as_json:
            click.echo(f"job {result['short_id']}: {done}")
    if as_json:
        echo_json(results)
    sys.exit(code)


@click.command("hold")
@click.argument("jobs", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the held jobs' status as JSON.")
@pass_state
@handle_errors
def hold(state: CliState, jobs: tuple[str, ...], as_json: bool) -> None:
    """Hold waiting jobs (JobHeldUser; JobHeldAdmin when an admin holds): they are not scheduled until released."""
    backend = state.backend()
    _each(jobs, backend.hold, "held", as_json)


@click.command("release")
@click.argument("jobs", nargs=-1, required=True)
@click.option("--json", "as_json", is_flag=True, help="Print the released jobs' status as JSON.")
@pass_state
@handle_errors
def release(state: CliState, jobs: tuple[str, ...], as_json: bool) -> None:
    """Release held jobs so they can be scheduled (an administrator's hold only by an administrator)."""
    backend = state.backend()
    _each(jobs, backend.release, "released", as_json)
