"""mscancel cancels metasched jobs the way scancel does: by id, name, user, state or account.

Ids are metasched's (``j4k9x2m7``, as msbatch and msqueue print them), array elements
(``j4k9x2m7_3``, ``j4k9x2m7_[1-3]``; the array's id alone is every element) or the Slurm id of
a launched job's attempt. A cancel goes through the API (``POST /v1/jobs/{id}/cancel``): the
job's owner, a coordinator of its tenant or an admin may cancel it; metasched stops its running
attempts in Slurm. ``--signal`` goes to the Slurm jobs of running jobs, through Slurm's own
``scancel --signal`` run as the caller (Slurm checks who may signal). Messages and exit codes
are scancel's (measured on Slurm 22.05): ``Invalid job id specified`` (1), ``Access/permission
denied`` (210), ``Job can not be altered now, try again later`` for a signal to a waiting job
(228), ``No job identification provided`` (1). A job that already ended is no error, as scancel.

``-M/--clusters`` (or ``SLURM_CLUSTERS``) restricts the command to jobs on those clusters
(``cli.sbatch.clusters`` says which cluster a job is on): a job id that names a job elsewhere is
``Invalid job id specified`` (1), as scancel says of an id its cluster does not have, and a bare
Slurm id is looked up on the named clusters (``-M dev2 123`` is ``dev2/123``).
"""

from __future__ import annotations

import subprocess
from collections import defaultdict
from typing import Any

import click

from cli.errors import handle_errors
from cli.remote import ApiBackend
from cli.sbatch.clusters import cluster_choice, clusters_option, on_cluster
from cli.sbatch.slurm_views import error, my_name, split_list, view_backend
from cli.sbatch.squeue_format import FormatError, check_states
from meta.model.arrays import collapsed_id, parse_element_ref
from meta.model.clusters import qualify, split_qualified

PROG = "mscancel"
EXIT_DENIED, EXIT_NOT_NOW = 210, 228  # scancel's exit codes for these errors (Slurm errno & 0xff)
_SCANCEL_STATES = {"PD": "PD", "PENDING": "PD", "R": "R", "RUNNING": "R"}


def kill_error(job: str, why: str) -> None:
    """kill_error prints scancel's per-job error line (scancel goes on with the other jobs)."""
    click.echo(f"{PROG}: error: Kill job error on job id {job}: {why}", err=True)


def _error_kind(exc: Exception) -> str:
    """_error_kind is the API error's type (``NotFound``, ``Forbidden``, ...), remote or local."""
    return str(getattr(exc, "error", type(exc).__name__))


def _selected(backend: ApiBackend, ids: list[str], filters: dict[str, Any],
              clusters: tuple[str, ...] | None) -> tuple[list[dict[str, Any]], int]:  # fmt: skip
    """_selected are the queued jobs the ids and filters name on ``clusters`` (-M), and the exit code of ids that name none."""
    rows = backend.queue(**filters)
    if not ids:
        return [r for r in rows if _on_clusters(r, clusters)], 0
    chosen, code = [], 0
    for ref in ids:
        named, here = _matching(rows, ref, clusters)
        chosen += [r for r in here if r not in chosen]
        # named but on another cluster: scancel -M finds no such job on the clusters it asks
        if (named and not here) or (not named and not _known(backend, ref)):
            kill_error(ref, "Invalid job id specified")
            code = 1
    return chosen, code


def _matching(
    rows: list[dict[str, Any]], ref: str, clusters: tuple[str, ...] | None
) -> tuple[bool, list[dict[str, Any]]]:
    """_matching: whether ``ref`` (job id, Slurm id, array elements) names queued rows, and those on ``clusters``."""
    slurm_ids = {ref, *(qualify(cluster, ref) for cluster in clusters or ())}  # -M dev2 123 is dev2/123
    match = [r for r in rows if ref in (r["job_id"], r["uuid"]) or slurm_ids & set(r["slurm_job_ids"])]
    if match:
        return True, [r for r in match if _on_clusters(r, clusters)]
    return _array_rows(rows, ref, clusters)


def _on_clusters(row: dict[str, Any], clusters: tuple[str, ...] | None) -> bool:
    """_on_clusters: no -M (None) or ``all`` (()) is every cluster."""
    return not clusters or any(on_cluster(row, cluster) for cluster in clusters)


def _array_rows(rows: list[dict[str, Any]], ref: str,
                clusters: tuple[str, ...] | None = None) -> tuple[bool, list[dict[str, Any]]]:  # fmt: skip
    """_array_rows: ``JOB`` of an array is the whole job; ``JOB_3`` or ``JOB_[1-3]`` are those elements wherever they are shown.

    With -M only the elements on ``clusters`` are named (an array's elements may run on different clusters).
    """
    element = parse_element_ref(ref)
    mine = [r for r in rows if element.job in (r.get("array_job_id"), r["uuid"])]
    if element.indexes is not None:
        mine = [r for r in mine if set(r.get("array_task_ids") or ()) & set(element.indexes)]
    here = [r for r in mine if _on_clusters(r, clusters)]
    if here and len(here) == len(mine):
        return True, [{**mine[0], "job_id": ref}]  # one cancel names them all
    wanted = set(element.indexes) if element.indexes is not None else None
    return bool(mine), [{**r, "job_id": _element_ref(r, wanted)} for r in here]


def _element_ref(row: dict[str, Any], wanted: set[int] | None) -> str:
    """_element_ref names the elements of an array row that ``wanted`` asks for (None: all of them), e.g. ``JOB_[1-2]``."""
    indexes = [i for i in row.get("array_task_ids") or () if wanted is None or i in wanted]
    return collapsed_id(row["array_job_id"], indexes, None)


def _known(backend: ApiBackend, ref: str) -> bool:
    """_known: the caller may see job ``ref`` (ended, or not matched by the filters: no error, as scancel)."""
    if ref.isdigit():
        return False  # a Slurm id that is no queued metasched job's
    try:
        backend.status(ref)
    except Exception as exc:  # noqa: BLE001 - only "not found" is answered here; the rest is raised
        if _error_kind(exc) == "NotFound":
            return False
        raise
    return True


def _cancel(backend: ApiBackend, row: dict[str, Any]) -> int:
    """_cancel cancels one job through the API; its scancel-style exit code."""
    try:
        backend.cancel(row["job_id"])
    except Exception as exc:  # noqa: BLE001 - refusals become scancel's lines; the rest is raised
        kind = _error_kind(exc)
        if kind == "Forbidden":
            kill_error(row["job_id"], "Access/permission denied")
            return EXIT_DENIED
        if kind == "NotFound":
            kill_error(row["job_id"], "Invalid job id specified")
            return 1
        raise
    return 0


def _signal(row: dict[str, Any], signal: str) -> int:
    """_signal sends ``signal`` to a running job's Slurm jobs with Slurm's scancel, as the caller."""
    if row["st"] != "R" or not row["slurm_job_ids"]:
        kill_error(row["job_id"], "Job can not be altered now, try again later")
        return EXIT_NOT_NOW
    code = 0
    for cluster, slurm_ids in sorted(_by_cluster(row["slurm_job_ids"]).items()):
        where = [f"--clusters={cluster}"] if cluster else []
        done = subprocess.run(["scancel", *where, f"--signal={signal}", *slurm_ids], timeout=60)
        code = done.returncode or code
    return code


def _by_cluster(slurm_ids: list[str]) -> dict[str, list[str]]:
    """_by_cluster groups Slurm ids by cluster, bare: Slurm's scancel knows ``dev2/123`` only as ``-M dev2 123``."""
    grouped: dict[str, list[str]] = defaultdict(list)
    for slurm_id in slurm_ids:
        cluster, bare = split_qualified(slurm_id)
        grouped[cluster].append(bare)
    return grouped


@click.command(name=PROG, context_settings={"help_option_names": ["--help"]})
@click.argument("ids", nargs=-1)
@click.option("-n", "--name", "names", multiple=True, help="Only jobs with this name.")
@click.option("-u", "--user", "users", multiple=True, help="Only this user's jobs.")
@click.option("-t", "--state", "states", multiple=True, help="Only jobs in this state: PENDING (PD) or RUNNING (R).")
@click.option("-A", "--account", "accounts", multiple=True, help="Only this account's (tenant's) jobs.")
@click.option("--me", is_flag=True, help="Only my jobs (as -u $USER).")
@click.option("-s", "--signal", "signal", default=None, help="Send this signal to running jobs instead of cancelling.")
@clusters_option("Only jobs on these clusters (a,b or all); a job id elsewhere is an invalid id.")
@click.option("--api", default=None, help="metasched API address (default: METASCHED_API or the local socket).")
@handle_errors
def main(ids, names, users, states, accounts, me, signal, clusters, api) -> None:  # type: ignore[no-untyped-def]
    """mscancel cancels or signals metasched jobs like scancel (see docs/sbatch.md, "msqueue and mscancel")."""
    refs = split_list(ids)
    wanted_states = split_list(states)
    try:
        check_states(wanted_states)
    except FormatError as exc:
        error(PROG, str(exc))
    bad = [s for s in wanted_states if s.upper() not in _SCANCEL_STATES]
    if bad:
        error(PROG, f"Invalid job state specified: {bad[0]} (mscancel takes PENDING or RUNNING)")
    try:
        on = cluster_choice(split_list(clusters))
    except ValueError as exc:
        error(PROG, f"invalid --clusters={','.join(clusters)}: {exc}")
    backend = view_backend(api)
    filters = {
        "users": split_list(users) + ([my_name(backend)] if me else []),
        "accounts": split_list(accounts),
        "names": split_list(names),
        "states": sorted({_SCANCEL_STATES[s.upper()] for s in wanted_states}),
    }
    if not refs and not any(filters.values()):
        error(PROG, "No job identification provided")
    rows, code = _selected(backend, refs, filters, on)
    for row in rows:
        code = (_signal(row, signal) if signal else _cancel(backend, row)) or code
    raise SystemExit(code)
