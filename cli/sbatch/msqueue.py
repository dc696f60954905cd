"""msqueue shows metasched's queue the way squeue does: waiting and launched jobs in one view.

JOBID is the id users give metasched (msbatch's ``Submitted batch job <id>``); ST is squeue's
compact state (PD waiting, in metasched or in Slurm; R running; CG being cancelled); REASON is
metasched's typed reason for a waiting job (``WaitingForQuota``, ``LowerFairShare``, ...,
``Launching`` once sent to Slurm); NODELIST the nodes of a running job. Everything comes from
the API (``GET /v1/queue``), which shows a user only the jobs of their accounts.

``-M/--clusters`` (or ``SLURM_CLUSTERS``) prints each named cluster's jobs under a
``CLUSTER: name`` line, as ``squeue -M`` does; ``cli.sbatch.clusters`` says which cluster a job
is on. With ``-h`` and several clusters the ``CLUSTER:`` lines go and the default format gains a
CLUSTER column first, as squeue's does.
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence
from typing import Any

import click

from cli.errors import handle_errors
from cli.output import echo_json
from cli.sbatch.clusters import (
    cluster_choice,
    clusters_option,
    in_section,
    on_cluster,
    row_cluster,
    seen_clusters,
)
from cli.sbatch.slurm_views import default_partition, error, my_name, split_list, view_backend
from cli.sbatch.squeue_format import (
    DEFAULT_FORMAT,
    FormatError,
    Part,
    check_states,
    parse_format,
    render_line,
)
from cli.sbatch.squeue_long_format import parse_long_format

PROG = "msqueue"
# squeue's column in front of its default format with -h over several clusters (its "cluster:10 ,")
CLUSTER_COLUMN = (Part(field="cluster", width=10), Part(text=" "))
Section = tuple[str, list[dict[str, Any]]]


def rows_for(backend, *, users, accounts, partitions, states, jobs, names) -> list[dict]:  # type: ignore[no-untyped-def]
    """rows_for asks the API for the selected jobs, filling in the default partition where none was asked."""
    rows = backend.queue(users=users, accounts=accounts, partitions=partitions, states=states, jobs=jobs, names=names)
    if any(row["partition"] is None for row in rows):
        fallback = default_partition()
        for row in rows:
            row["partition"] = row["partition"] or fallback
    return rows


def sections(rows: Sequence[Mapping[str, Any]], chosen: tuple[str, ...]) -> list[Section]:
    """sections are each cluster's rows for ``-M`` (``()``: every cluster the rows name), in the order given."""
    names = list(chosen) or seen_clusters(rows)
    return [(name, [in_section(row, name) for row in rows if on_cluster(row, name)]) for name in names]


def print_rows(parts: list[Part], rows: Sequence[Mapping[str, Any]], noheader: bool) -> None:
    """print_rows prints the header (unless -h) and one line per row."""
    if not noheader:
        click.echo(render_line(parts, None))
    for row in rows:
        click.echo(render_line(parts, row))


def print_sections(parts: list[Part], found: list[Section], noheader: bool) -> None:
    """print_sections prints squeue -M's ``CLUSTER: name`` blocks, a blank line between two (none with -h)."""
    for index, (name, rows) in enumerate(found):
        if not noheader:
            if index:
                click.echo("")
            click.echo(f"CLUSTER: {name}")
        print_rows(parts, rows, noheader)


def show(
    rows: list[dict[str, Any]],
    chosen: tuple[str, ...] | None,
    parts: list[Part],
    *,
    noheader: bool,
    as_json: bool,
    default_format: bool,
) -> None:
    """show prints the rows as squeue would: plainly, or in ``-M`` sections (``chosen``); as JSON with --json."""
    for row in rows:
        row["cluster"] = row_cluster(row)
    found = sections(rows, chosen) if chosen is not None else []
    if not found:  # no -M, or -M all on a site of one cluster (no names to list): squeue's plain view
        if as_json:
            echo_json(rows)
        else:
            print_rows(parts, rows, noheader)
        return
    if as_json:
        echo_json([row for _, shown in found for row in shown])
        return
    if noheader and len(found) > 1 and default_format:
        parts = [*CLUSTER_COLUMN, *parts]
    print_sections(parts, found, noheader)


@click.command(name=PROG, context_settings={"help_option_names": ["--help"]})
@click.option("-u", "--user", "users", multiple=True, help="Only these users' jobs (comma-separated).")
@click.option("-A", "--account", "accounts", multiple=True, help="Only these accounts' (tenants') jobs.")
@click.option("-p", "--partition", "partitions", multiple=True, help="Only jobs of these partitions.")
@click.option("-t", "--states", "states", multiple=True, help="Only these states: PD,R,CG,CD,F,CA or all.")
@click.option("-j", "--jobs", "jobs", multiple=True, help="Only these job ids.")
@click.option("-n", "--name", "names", multiple=True, help="Only jobs with these names.")
@click.option("--me", is_flag=True, help="Only my jobs (as -u $USER).")
@click.option("-h", "--noheader", is_flag=True, help="Print no header line.")
@click.option("-o", "--format", "fmt", default=None, help=f"Output format (default {DEFAULT_FORMAT!r}).")
@click.option("-O", "--Format", "long_fmt", default=None, help="squeue's -O: Field[:[.][size][suffix]],...")
@clusters_option("Only jobs on these clusters (a,b or all), each cluster's under a 'CLUSTER: name' line.")
@click.option("--json", "as_json", is_flag=True, help="Print the rows as JSON (the API's fields, cluster).")
@click.option("--api", default=None, help="metasched API address (default: METASCHED_API or the local socket).")
@handle_errors
def main(users, accounts, partitions, states, jobs, names, me, noheader, fmt, long_fmt, clusters, as_json, api) -> None:  # type: ignore[no-untyped-def]
    """msqueue lists metasched's waiting and running jobs like squeue (see docs/sbatch.md, "msqueue and mscancel")."""
    try:
        parts = parse_long_format(long_fmt) if long_fmt else parse_format(fmt if fmt is not None else DEFAULT_FORMAT)
        wanted_states = check_states(split_list(states))
    except FormatError as exc:
        error(PROG, str(exc))
    try:
        chosen = cluster_choice(split_list(clusters))
    except ValueError as exc:
        error(PROG, f"invalid --clusters={','.join(clusters)}: {exc}")
    backend = view_backend(api)
    wanted_users = split_list(users) + ([my_name(backend)] if me else [])
    rows = rows_for(
        backend, users=wanted_users, accounts=split_list(accounts), partitions=split_list(partitions),
        states=wanted_states, jobs=split_list(jobs), names=split_list(names),
    )  # fmt: skip
    plain = fmt is None and long_fmt is None
    show(rows, chosen, parts, noheader=noheader, as_json=as_json, default_format=plain)
