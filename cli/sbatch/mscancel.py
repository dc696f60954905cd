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
"""

from __future__ import annotations

import subprocess
from typing import Any

import click

from cli.errors import handle_errors
from cli.remote import ApiBackend
from cli.sbatch.slurm_views import error, my_name, split_list, view_backend
from cli.sbatch.squeue_format import FormatError, check_states
from meta.model.arrays import parse_element_ref

PROG = "mscancel"
EXIT_DENIED, EXIT_NOT_NOW = 210, 228  # scancel's exit codes for these errors (Slurm errno & 0xff)
_SCANCEL_STATES = {"PD": "PD", "PENDING": "PD", "R": "R", "RUNNING": "R"}


def kill_error(job: str, why: str) -> None:
    """kill_error prints scancel's per-job error line (scancel goes on with the other jobs)."""
    click.echo(f"{PROG}: error: Kill job error on job id {job}: {why}", err=True)


def _error_kind(exc: Exception) -> str:
    """_error_kind is the API error's type (``NotFound``, ``Forbidden``, ...), remote or local."""
    return str(getattr(exc, "error", type(exc).__name__))


def _selected(backend: ApiBackend, ids: list[str], filters: dict[str, Any]) -> tuple[list[dict[str, Any]], int]:
    """_selected are the queued jobs the ids and filters name, and the exit code of ids that name none."""
    rows = backend.queue(**filters)
    if not ids:
        return rows, 0
    chosen, code = [], 0
    for ref in ids:
        match = [r for r in rows if ref in (r["job_id"], r["uuid"]) or ref in r["slurm_job_ids"]] or _array_rows(rows, ref)
        if match:
            chosen += [r for r in match if r not in chosen]
        elif not _known(backend, ref):
            kill_error(ref, "Invalid job id specified")
            code = 1
    return chosen, code


def _array_rows(rows: list[dict[str, Any]], ref: str) -> list[dict[str, Any]]:
    """_array_rows: ``JOB`` of an array is the whole job; ``JOB_3`` or ``JOB_[1-3]`` are those elements wherever they are shown."""
    element = parse_element_ref(ref)
    mine = [r for r in rows if element.job in (r.get("array_job_id"), r["uuid"])]
    if element.indexes is not None:
        mine = [r for r in mine if set(r.get("array_task_ids") or ()) & set(element.indexes)]
    return [{**mine[0], "job_id": ref}] if mine else []  # one cancel names them all


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
    done = subprocess.run(["scancel", f"--signal={signal}", *row["slurm_job_ids"]], timeout=60)
    return done.returncode


@click.command(name=PROG, context_settings={"help_option_names": ["--help"]})
@click.argument("ids", nargs=-1)
@click.option("-n", "--name", "names", multiple=True, help="Only jobs with this name.")
@click.option("-u", "--user", "users", multiple=True, help="Only this user's jobs.")
@click.option("-t", "--state", "states", multiple=True, help="Only jobs in this state: PENDING (PD) or RUNNING (R).")
@click.option("-A", "--account", "accounts", multiple=True, help="Only this account's (tenant's) jobs.")
@click.option("--me", is_flag=True, help="Only my jobs (as -u $USER).")
@click.option("-s", "--signal", "signal", default=None, help="Send this signal to running jobs instead of cancelling.")
@click.option("--api", default=None, help="metasched API address (default: METASCHED_API or the local socket).")
@handle_errors
def main(ids, names, users, states, accounts, me, signal, api) -> None:  # type: ignore[no-untyped-def]
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
    backend = view_backend(api)
    filters = {
        "users": split_list(users) + ([my_name(backend)] if me else []),
        "accounts": split_list(accounts),
        "names": split_list(names),
        "states": sorted({_SCANCEL_STATES[s.upper()] for s in wanted_states}),
    }
    if not refs and not any(filters.values()):
        error(PROG, "No job identification provided")
    rows, code = _selected(backend, refs, filters)
    for row in rows:
        code = (_signal(row, signal) if signal else _cancel(backend, row)) or code
    raise SystemExit(code)
