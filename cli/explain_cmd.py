"""``metasched explain JOB``: why each of a job's tasks waits, from the last cycle."""

from __future__ import annotations

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table, short_time


@click.command()
@click.argument("job")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def explain(state: CliState, job: str, as_json: bool) -> None:
    """Explain why JOB's tasks wait: one typed reason each, and what would make them run."""
    result = state.backend().explain(job)
    if as_json:
        echo_json(result)
        return
    click.echo(f"job {result['job']}: {result['state']}")
    echo_table(
        ["TASK", "STATE", "REASON", "WHY", "WHAT WOULD HELP", "SINCE"],
        [
            [i["task"], i["state"], i["code"] or "-", i["message"], i["remedy"] or "-", short_time(i["at"])]
            for i in result["tasks"]
        ],
    )
