"""``metasched job secrets --export``: what a running job asks the service about itself at start."""

from __future__ import annotations

import os
import re
import shlex

import click

from cli.attempt_env import attempt_identity, attempt_option, attempt_secret, token_option
from cli.context import CliState, pass_state
from cli.errors import handle_errors
from meta.model.errors import InvalidRequest

NAMES_ENV = "METASCHED_SECRET_NAMES"
_ENV_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")


@click.group(name="job")
def job_group() -> None:
    """Calls a running job makes about itself (its batch script makes them)."""


@job_group.command(name="secrets")
@click.option("--export", "export", is_flag=True, help="Print `export NAME=<value>` lines for the shell to eval.")
@attempt_option
@token_option
@pass_state
@handle_errors
def secrets_cmd(state: CliState, export: bool, attempt: str | None, token: int | None) -> None:
    """Fetch the secrets this job declared ($METASCHED_SECRET_NAMES) from the service, as shell exports.

    The values travel from the service to this process and on to the job's shell only: they are
    never in the batch script, Slurm's records or metasched's store. Needs the job's own proof
    (its user's MUNGE credential, $METASCHED_ATTEMPT_SECRET and the current fencing token).
    """
    if not export:
        raise InvalidRequest("this prints secret values as shell code: pass --export and eval its output")
    names = [name for name in os.environ.get(NAMES_ENV, "").split(",") if name]
    bad = [name for name in names if not _ENV_NAME.fullmatch(name)]
    if bad:
        raise InvalidRequest(f"{NAMES_ENV} holds names that are not environment variable names: {bad[:3]}")
    attempt_id, fencing_token = attempt_identity(attempt, token)
    backend = state.backend(job_side=True)
    proof = attempt_secret()
    lines = []
    for name in names:  # all fetched before anything is printed: a failure exports nothing
        value = backend.attempt_secret(attempt_id, fencing_token, name, secret=proof)["value"]
        lines.append(f"export {name}={shlex.quote(value)}")
    for line in lines:
        click.echo(line)
