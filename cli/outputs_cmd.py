"""``metasched commit`` (from inside a partition) and ``metasched outputs JOB``."""

from __future__ import annotations

import os

import click

from checkpoint.manifest_files import build_manifest
from cli.attempt_env import attempt_identity, attempt_option, attempt_secret, token_option
from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table
from meta.model.errors import InvalidRequest


@click.command(name="commit")
@click.option(
    "--dir", "directory", default=None, help="Staging dir to commit (default: $METASCHED_OUTPUT_DIR)."
)
@attempt_option
@token_option
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def commit_cmd(
    state: CliState, directory: str | None, attempt: str | None, token: int | None, as_json: bool
) -> None:
    """Commit this partition attempt's output manifest: once, and only as the current attempt."""
    attempt_id, fencing_token = attempt_identity(attempt, token)
    staging = directory or os.environ.get("METASCHED_OUTPUT_DIR")
    if not staging:
        raise InvalidRequest("no staging directory: pass --dir or run inside a metasched inference job")
    # the files are read here, where the job wrote them; the service records what it is told, fenced
    result = state.backend(job_side=True).commit(attempt_id, fencing_token, build_manifest(staging), secret=attempt_secret())
    if as_json:
        echo_json(result)
        return
    click.echo(f"committed {result['files']} file(s) for task {result['task_id'][:8]}")


@click.command(name="outputs")
@click.argument("job")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def outputs(state: CliState, job: str, as_json: bool) -> None:
    """Show a job's visible outputs: exactly one committed manifest per partition."""
    manifest = state.backend().outputs(job)
    if as_json:
        echo_json(manifest)
        return
    click.echo(f"job {manifest['job']}: {'complete' if manifest['complete'] else 'incomplete'}")
    echo_table(
        ["PARTITION", "NAME", "ATTEMPT", "FILES", "BYTES", "COMMITTED"],
        [
            [
                p["index"],
                p["name"],
                (p["attempt"] or "-")[:8],
                len(p["manifest"]["files"]) if p["manifest"] else "-",
                p["manifest"]["bytes"] if p["manifest"] else "-",
                (p["committed_at"] or "-")[:19],
            ]
            for p in manifest["partitions"]
        ],
    )
