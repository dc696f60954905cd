"""``metasched explain JOB``: why each of a job's tasks waits, from the last cycle; ``--history``: what ran before it.

On a site of several Slurm clusters a ``clusters:`` block follows: each cluster, its verdict and why.
"""

from __future__ import annotations

from datetime import UTC, datetime
from typing import Any

import click

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json, echo_table, short_time


@click.command()
@click.argument("job")
@click.option("--history", is_flag=True, help="What ran before JOB while it waited, and why (the decision log).")
@click.option("--limit", default=20, show_default=True, type=click.IntRange(1, 200), help="Rows of --history.")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def explain(state: CliState, job: str, history: bool, limit: int, as_json: bool) -> None:
    """Explain why JOB's tasks wait: one typed reason each, what would make them run, and (several clusters) why each cluster or not."""
    if history:
        result = state.backend().explain_history(job, limit)
        if as_json:
            echo_json(result)
        else:
            _print_history(result)
        return
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
    _print_clusters(result["tasks"])


def _print_clusters(tasks: list[dict[str, Any]]) -> None:
    """_print_clusters prints each task's per-cluster verdicts once per distinct block (several clusters only)."""
    blocks: dict[tuple, list[int]] = {}
    for item in tasks:
        if item.get("clusters"):
            key = tuple((c["cluster"], c["verdict"], c["message"]) for c in item["clusters"])
            blocks.setdefault(key, []).append(item["task"])
    for block, indices in blocks.items():
        # one block shared by every task is printed once, unlabelled
        which = "" if len(blocks) == 1 and len(indices) == len(tasks) else f" of {_tasks(indices)}"
        click.echo(f"clusters{which}:")
        width = max(len(cluster) for cluster, _, _ in block)
        verdicts = max(len(verdict) for _, verdict, _ in block)
        for cluster, verdict, message in block:
            click.echo(f"  {cluster:<{width}}  {verdict:<{verdicts}}  {message}")


def _tasks(indices: list[int]) -> str:
    """_tasks names task indices compactly: ``task 3``, ``tasks 0-2, 5``."""
    spans: list[list[int]] = []
    for i in sorted(indices):
        if spans and i == spans[-1][1] + 1:
            spans[-1][1] = i
        else:
            spans.append([i, i])
    text = ", ".join(f"{a}" if a == b else f"{a}-{b}" for a, b in spans)
    return f"task {text}" if len(indices) == 1 else f"tasks {text}"


def _key(key: dict[str, Any] | None) -> str:
    """_key renders an order key compactly: tier/class, share, age, slack."""
    if not key:
        return "-"
    tier = key["class"] if key["tier"] == "class" else f"{key['tier']} ({key['class']})"
    slack = f" slack {key['slack_s']:.0f}s" if key.get("slack_s") is not None else ""
    group = {True: " guaranteed", False: " borrowing"}.get(key.get("guaranteed"), "")
    return f"{tier}{group} {_line(key)} share {key['share']:.3f} age {key['age_s']:.0f}s{slack}"


def _line(key: dict[str, Any]) -> str:
    """_line is the place in line: an instant (submit time + weighted runtime) as UTC, or a share."""
    position = float(key["position"])
    if key["tier"] == "class" and position > 1e9:
        return "line " + datetime.fromtimestamp(position, UTC).strftime("%m-%d %H:%M")
    return f"line {position:.3f}" if key["tier"] == "class" else ""


def _print_history(result: dict[str, Any]) -> None:
    """_print_history prints what ran before the job and what touched it, newest first."""
    until = "still waiting" if result["waiting"] else f"until {short_time(result['until'])}"
    shown = len(result["ran_before"])
    click.echo(f"job {result['job']} ({result['tenant']}): waiting since {short_time(result['since'])}, {until}; "
               f"{result['placed_while_waiting']} other placements meanwhile (newest {shown} shown)")  # fmt: skip
    echo_table(
        ["CYCLE", "AT", "RAN", "TENANT", "ITS KEY", "YOUR KEY", "WHY IT WENT FIRST"],
        [[r["cycle"], short_time(r["at"]), r["job"], r["tenant"], _key(r["key"]),
          _key(r["your_key"]) + (" (rebuilt)" if r["your_key_source"] == "rebuilt" else ""), r["why"]]
         for r in result["ran_before"]],
    )  # fmt: skip
    if result["touching"]:
        click.echo("")
        echo_table(
            ["CYCLE", "AT", "DECISION", "WHAT", "OTHER JOB", "REASON"],
            [[t["cycle"], short_time(t["at"]), t["decision"], t["what"],
              f"{t['other']['job']} ({t['other']['tenant']})" if t.get("other") else "-", t["reason"]]
             for t in result["touching"]],
        )  # fmt: skip
