"""Database administration: ``metasched db upgrade``, ``current``, ``site``, ``backup``, ``restore`` and ``unknown-jobs``.

Backup and restore (docs/operations.md, "Backup and restore"): ``db backup FILE`` takes one
consistent copy while ``serve`` runs (PostgreSQL: ``pg_dump --format=custom``; SQLite: the
online backup API), ``db restore FILE`` loads it into an empty database or a new SQLite file.
An older copy does not know what was launched after it: ``db unknown-jobs`` lists the Slurm
jobs tagged with the store's site whose attempts it lacks, and what ``serve`` would do with each;
``--cancel`` cancels those whose task waits in the store (``serve`` would run it a second time).
The file handling is ``cli/db_backup.py``; this module reads the store.
"""

from __future__ import annotations

import os
import shlex
import time
from collections.abc import Callable
from dataclasses import asdict, dataclass
from pathlib import Path
from typing import Any

import click
from sqlalchemy import func, select

from cli.context import CliState, pass_state
from cli.db_backup import (
    PG_DUMP_FORMAT,
    SQLITE_FORMAT,
    BackupError,
    backend,
    check_new_file,
    file_format,
    pg_archive_tables,
    pg_dump,
    pg_restore,
    pg_tables,
    sqlite_copy,
    sqlite_path,
    sqlite_tables,
    sqlite_target_free,
)
from cli.errors import EXIT_ERROR, EXIT_USAGE, fail, handle_errors
from cli.output import echo_json, echo_table
from meta.model.clusters import job_ref, job_ref_order
from meta.model.states import LIVE_ATTEMPT_STATES, TERMINAL_TASK_STATES
from meta.store.chunks import chunked
from meta.store.db import Database, redact, resolve_url
from meta.store.migrate import current_revision, head_revision, upgrade
from meta.store.models import AdoptedJob, Attempt, Job, LeaderLease, Task, Transition
from meta.store.schema_plan import UpgradeRefused, pending, plan_text, refusal, running_on, verdict
from meta.store.site import SiteInUse, ensure_site_id, renew_site_id, stored_site_id
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.errors import SlurmError
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.runner import CommandRunner
from slurm_bridge.states import map_state
from slurm_bridge.tags import parse_tag

_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]
_ENDED_TASK = {state.value for state in TERMINAL_TASK_STATES}
_SCRIPT_TIMEOUT_S = 10.0


@click.group()
def db() -> None:
    """Manage the metasched database schema.

    Also its site id, backups and restores (docs/operations.md, "Backup and restore").
    """


@db.command(name="upgrade")
@click.option("--plan", is_flag=True, help="Show the pending migrations, whether each is online-safe and what runs "
              "on the store; change nothing.")
@click.option("--offline-ok", is_flag=True, help="Every replica of the older version is stopped: apply migrations "
              "that are not online-safe although the store still seems in use (docs/upgrades.md).")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def db_upgrade(state: CliState, plan: bool, offline_ok: bool, as_json: bool) -> None:
    """Apply migrations up to the newest schema (safe to run concurrently and repeatedly).

    A migration that is not online-safe is refused while the store is in use (a leader's fresh
    lease, other PostgreSQL sessions): older replicas would misread what it changes (docs/upgrades.md).
    """
    url = resolve_url(state.db_url)
    database = Database(url)
    current = current_revision(database.engine)
    steps = pending(current)  # SchemaNewer (exit 1) when a newer metasched migrated the store
    # an empty store has no replica; looked at before this process opens a second connection
    running = running_on(database.engine) if current is not None and steps else []
    why_not = None if offline_ok else refusal(steps, running)
    if plan:
        if as_json:
            echo_json({"database": redact(url), "at": current, "head": head_revision(), "running": running,
                       "pending": [step.as_dict() for step in steps], "refused": why_not is not None,
                       "verdict": verdict(steps, running, offline_ok)})  # fmt: skip
            return
        click.echo(plan_text(redact(url), current, steps, running))
        click.echo(verdict(steps, running, offline_ok))
        return
    if why_not is not None:
        click.echo(plan_text(redact(url), current, steps, running))  # the plan on stdout, the refusal on stderr
        fail(why_not, EXIT_ERROR)

    def guard(locked_at: str | None) -> None:
        # another db upgrade may have moved the store while this one waited for the lock
        if not offline_ok and locked_at != current and (reason := refusal(pending(locked_at), running)):
            raise UpgradeRefused(reason)

    before, after = upgrade(database.engine, url, guard=guard)
    site = ensure_site_id(database)  # a new store gets its site id now, before any daemon runs
    applied = pending(before) if before != after else []
    if as_json:
        echo_json({"database": redact(url), "from": before, "to": after, "site": site,
                   "applied": [step.as_dict() for step in applied], "running": running})  # fmt: skip
        return
    if before is not None:  # an empty store's every migration is no news
        for step in applied:
            click.echo(f"  applied {step.revision} ({'online-safe' if step.online_safe else 'NOT online-safe'}): "
                       f"{step.summary}")  # fmt: skip
    click.echo(f"{redact(url)}: {before or 'empty'} -> {after}")


@db.command(name="current")
@pass_state
@handle_errors
def db_current(state: CliState) -> None:
    """Show the schema revision of the database and the newest one this version ships."""
    url = resolve_url(state.db_url)
    database = Database(url)
    revision = current_revision(database.engine)
    site = stored_site_id(database) or "none yet"
    click.echo(f"{redact(url)}: at {revision or 'empty'}, head {head_revision()}, site {site}")


@db.command(name="site")
@click.option("--renew", is_flag=True, help="Draw a new site id (a store copied from another site's).")
@click.option("--yes", is_flag=True, help="Really renew (without it, --renew changes nothing).")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def db_site(state: CliState, renew: bool, yes: bool, as_json: bool) -> None:
    """Show the store's site id, which every Slurm job tag names; --renew --yes draws a new one."""
    database = Database(resolve_url(state.db_url))
    if renew and not yes:
        fail("--renew changes which Slurm jobs this store follows: add --yes (with every serve stopped)", EXIT_USAGE)
    if renew:
        try:
            site = renew_site_id(database)
        except SiteInUse as exc:
            fail(f"cannot renew the site id: {exc}", EXIT_ERROR)
            raise  # unreachable: fail exits
    else:
        site = stored_site_id(database) or ensure_site_id(database)
    if as_json:
        echo_json({"site": site, "renewed": renew})
        return
    click.echo(site)


# --- backup and restore -------------------------------------------------------------------------


@db.command(name="backup")
@click.argument("file", type=click.Path(dir_okay=False, path_type=Path))
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def db_backup(state: CliState, file: Path, as_json: bool) -> None:
    """Write one consistent copy of the store to FILE (0600, never overwritten), while serve runs.

    PostgreSQL: pg_dump --format=custom (restore it with `metasched db restore`, or pg_restore).
    SQLite: SQLite's online backup, a plain SQLite file (never a copy of the file and its -wal).
    """
    url = resolve_url(state.db_url)
    dest = file.absolute()
    check_new_file(dest)
    kind = backend(url)
    if kind == "sqlite" and not sqlite_path(url).is_file():
        raise BackupError(f"no store at {sqlite_path(url)}")
    database = Database(url)
    try:
        revision, site = current_revision(database.engine), stored_site_id(database)
        if revision is None:
            raise BackupError(f"{redact(url)} is empty: nothing to back up (`metasched db upgrade` makes a store)")
        started = time.monotonic()
        if kind == "postgresql":
            pg_dump(url, dest)
        else:
            sqlite_copy(sqlite_path(url), dest, journal="delete")
        seconds = time.monotonic() - started
    finally:
        database.dispose()
    size = dest.stat().st_size
    fmt = PG_DUMP_FORMAT if kind == "postgresql" else SQLITE_FORMAT
    if as_json:
        echo_json({"file": str(dest), "bytes": size, "seconds": round(seconds, 3), "format": fmt,
                   "database": redact(url), "revision": revision, "site": site})  # fmt: skip
        return
    click.echo(f"{redact(url)} -> {dest}: {_size(size)} ({fmt}) in {seconds:.1f} s; revision {revision}, site {site}")


@db.command(name="restore")
@click.argument("file", type=click.Path(exists=True, dir_okay=False, path_type=Path))
@click.option("--no-slurm", is_flag=True,
              help="Do not list the Slurm jobs of the store's site it lacks (restoring away from the cluster).")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def db_restore(state: CliState, file: Path, no_slurm: bool, as_json: bool) -> None:
    """Load a `metasched db backup` FILE into an empty store: --db names an empty database or a new SQLite file.

    Then it lists the Slurm jobs tagged with the store's site that the restored copy does not
    know (launched after the backup), as `metasched db unknown-jobs` does: run that with --cancel
    before starting serve (docs/operations.md, "Backup and restore").
    """
    url = resolve_url(state.db_url)
    source = file.absolute()
    fmt = file_format(source)
    started = time.monotonic()
    if backend(url) == "postgresql":
        if fmt != PG_DUMP_FORMAT:
            raise BackupError(f"{source} is a SQLite backup: restore it into a sqlite:///PATH store")
        if "alembic_version" not in pg_archive_tables(source):
            raise BackupError(f"{source} is not a metasched store (no alembic_version table)")
        existing = pg_tables(url)
        if existing:
            raise BackupError(f"{redact(url)} is not empty ({len(existing)} tables): restore into a new, empty "
                              "database (createdb -O <role> <name>), then point serve at it")  # fmt: skip
        pg_restore(url, source)
    else:
        if fmt != SQLITE_FORMAT:
            raise BackupError(f"{source} is a pg_dump archive: restore it into a postgresql+psycopg:// database")
        if "alembic_version" not in sqlite_tables(source):
            raise BackupError(f"{source} is not a metasched store (no alembic_version table)")
        target = sqlite_path(url)
        sqlite_target_free(target)
        sqlite_copy(source, target, journal="wal")
    seconds = time.monotonic() - started
    database = Database(url)
    try:
        summary = _summary(database)
        unknown: list[UnknownJob] | None = None
        problem = ""
        if not no_slurm:
            try:
                unknown = find_unknown_jobs(database, CliSlurmClient(), read_batch_script)
            except (SlurmError, OSError) as exc:
                problem = str(exc).splitlines()[0] if str(exc) else type(exc).__name__
    finally:
        database.dispose()
    if as_json:
        echo_json({"file": str(source), "database": redact(url), "seconds": round(seconds, 3), **summary,
                   "unknown_jobs": None if unknown is None else [asdict(job) for job in unknown],
                   "slurm_problem": problem or None})  # fmt: skip
        return
    click.echo(f"{source} -> {redact(url)} in {seconds:.1f} s: revision {summary['revision']}, site {summary['site']}, "
               f"{summary['jobs']} jobs, {summary['live_attempts']} live attempts, newest change {summary['as_of']}")  # fmt: skip
    if summary["revision"] != summary["head"]:
        click.echo(f"the schema is at {summary['revision']}, this metasched's head is {summary['head']}: "
                   "run `metasched db upgrade` (serve waits for it)")  # fmt: skip
    if no_slurm:
        click.echo("Slurm not read (--no-slurm): run `metasched db unknown-jobs` on a head node before starting serve")
    elif unknown is None:
        click.echo(f"Slurm could not be read ({problem}): run `metasched db unknown-jobs` on a head node "
                   "before starting serve")  # fmt: skip
    else:
        _echo_unknown(summary["site"], unknown)
        if any(job.runs_again for job in unknown):
            click.echo("before starting serve: `metasched db unknown-jobs --cancel`")


@db.command(name="unknown-jobs")
@click.option("--cancel", is_flag=True,
              help="scancel the jobs whose task waits in this store (serve would run that task a second time).")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def db_unknown_jobs(state: CliState, cancel: bool, as_json: bool) -> None:
    """List active Slurm jobs tagged with this store's site whose attempt the store lacks (after a restore).

    For each: its metasched job and task as its batch script names them, the task's state in this
    store, and what serve will do with the job. --cancel cancels those whose task is still to run
    in this store; the others are left as serve leaves them.
    """
    database = Database(resolve_url(state.db_url))
    client = CliSlurmClient()
    try:
        site = stored_site_id(database)
        try:
            unknown = find_unknown_jobs(database, client, read_batch_script)
        except SlurmError as exc:
            fail(f"cannot read Slurm: {exc}", EXIT_ERROR)
            raise  # unreachable: fail exits
    finally:
        database.dispose()
    if cancel:
        unknown = cancel_runs_again(client, unknown)
    if as_json:
        echo_json({"site": site, "unknown_jobs": [asdict(job) for job in unknown]})
        return
    _echo_unknown(site, unknown)


# --- what a restored store does not know ------------------------------------------------------------


@dataclass(frozen=True)
class UnknownJob:
    """UnknownJob is an active Slurm job tagged with the store's site for an attempt the store does not have."""

    slurm_job_id: str
    user: str
    uid: int | None
    state: str
    attempt: str
    job: str | None  # the metasched job's short id, as its batch script or the adopted-jobs table names it
    task: str | None
    in_store: str  # the task's state here, "adopted" (its job waits to be released), "absent" or "unknown"
    runs_again: bool  # serve would run its task again (beside it, unless it is the daemon's own job)
    serve_will: str
    cancelled: bool = False


def read_batch_script(slurm_job_id: str) -> str | None:
    """read_batch_script is the job's batch script (``scontrol write batch_script ID -``; root only), None if unread."""
    try:
        return CommandRunner().run("scontrol", ["write", "batch_script", slurm_job_id, "-"],
                                   timeout_s=_SCRIPT_TIMEOUT_S).stdout  # fmt: skip
    except SlurmError:
        return None


def script_exports(script: str | None) -> dict[str, str]:
    """script_exports are the ``export METASCHED_...=value`` lines of a script metasched rendered."""
    found: dict[str, str] = {}
    for line in (script or "").splitlines():
        if not line.startswith("export METASCHED_"):
            continue
        name, _, value = line[len("export "):].partition("=")
        try:
            words = shlex.split(value)
        except ValueError:
            continue
        if len(words) == 1:
            found.setdefault(name, words[0])
    return found


def find_unknown_jobs(
    database: Database, client: Any, read_script: Callable[[str], str | None], daemon_uid: int | None = None
) -> list[UnknownJob]:
    """find_unknown_jobs lists the active Slurm jobs of this store's site whose attempts it does not have."""
    site = stored_site_id(database)
    if site is None:
        return []  # no site id yet: no job was ever tagged for this store
    daemon = os.geteuid() if daemon_uid is None else daemon_uid
    active: dict[str, tuple[SqueueJob, str]] = {}
    for row in client.squeue():
        if row.het_job_offset not in (None, 0):
            continue
        tag = parse_tag(row.name, row.comment)
        if tag is None or tag.site != site or map_state(row.state, row.exit_code, row.signal).terminal:
            continue
        active[job_ref(row.job_id, row.cluster)] = (row, tag.attempt_id)
    if not active:
        return []
    found = []
    with database.session() as session:
        stored: set[str] = set()
        for chunk in chunked(sorted({attempt for _, attempt in active.values()})):
            stored.update(session.scalars(select(Attempt.id).where(Attempt.id.in_(chunk))))
        for slurm_id, (row, attempt) in sorted(active.items(), key=lambda item: job_ref_order(item[0])):
            if attempt in stored:
                continue
            found.append(_judge(session, slurm_id, row, attempt, read_script, daemon))
    return found


def _judge(session: Any, slurm_id: str, row: SqueueJob, attempt: str, read_script: Callable[[str], str | None],
           daemon_uid: int) -> UnknownJob:  # fmt: skip
    """_judge says what an unknown job is to this store, and what serve will do with it."""
    ours = row.user_id is not None and row.user_id == daemon_uid
    adopted = session.scalar(select(AdoptedJob.job_id).where(AdoptedJob.slurm_job_id == slurm_id))
    exports = {} if adopted else script_exports(read_script(slurm_id))
    task = session.get(Task, exports["METASCHED_TASK_ID"]) if exports.get("METASCHED_ATTEMPT_ID") == attempt \
        and "METASCHED_TASK_ID" in exports else None  # fmt: skip
    if adopted:
        job = session.get(Job, adopted)
        in_store, runs_again, short = "adopted", False, job.short_id if job else None
        will = "end its metasched job as cancelled (released outside this store); the Slurm job runs on"
    elif task is not None:
        job = session.get(Job, task.job_id)
        short = job.short_id if job else exports.get("METASCHED_JOB_NAME")
        in_store, runs_again = task.state, task.state not in _ENDED_TASK
        if runs_again:
            will = "cancel it (an orphan), then run its task again" if ours else "run its task again beside it"
        else:
            will = "cancel it (an orphan)" if ours else "leave it running, untracked"
    else:
        short = exports.get("METASCHED_JOB_NAME")
        in_store, runs_again = ("absent" if exports.get("METASCHED_ATTEMPT_ID") == attempt else "unknown"), False
        will = "cancel it (an orphan)" if ours else "leave it running, untracked"
    return UnknownJob(slurm_id, row.user_name, row.user_id, row.state, attempt, short,
                      task.id if task is not None else None, in_store, runs_again, will)  # fmt: skip


def cancel_runs_again(client: Any, unknown: list[UnknownJob]) -> list[UnknownJob]:
    """cancel_runs_again scancels the jobs whose task serve would run again; returns the list marked."""
    wanted = [job.slurm_job_id for job in unknown if job.runs_again]
    if not wanted:
        return unknown
    try:
        client.cancel(wanted)
    except SlurmError as exc:
        fail(f"scancel {' '.join(wanted)} failed: {exc}", EXIT_ERROR)
    done = []
    for job in unknown:
        if job.runs_again:
            job = UnknownJob(**{**asdict(job), "cancelled": True,
                                "serve_will": "run its task again (this job was cancelled)"})  # fmt: skip
        done.append(job)
    return done


def _echo_unknown(site: str | None, unknown: list[UnknownJob]) -> None:
    if not unknown:
        click.echo(f"Slurm has no active job of site {site} that this store lacks")
        return
    click.echo(f"{len(unknown)} active Slurm job(s) of site {site} are not in this store (launched after its copy):")
    echo_table(
        ["SLURM_ID", "USER", "STATE", "JOB", "TASK_HERE", "CANCELLED", "SERVE_WILL"],
        [[job.slurm_job_id, job.user, job.state, job.job or "-", job.in_store, "yes" if job.cancelled else "no",
          job.serve_will] for job in unknown],
    )  # fmt: skip


def _summary(database: Database) -> dict[str, Any]:
    """_summary is what a restored store holds: schema revision, site, jobs, live attempts, its newest change."""
    with database.session() as session:
        jobs = session.scalar(select(func.count()).select_from(Job)) or 0
        live = session.scalar(select(func.count()).select_from(Attempt).where(Attempt.state.in_(_LIVE))) or 0
        newest = [session.scalar(select(func.max(column))) for column in
                  (Transition.at, Job.submitted_at, LeaderLease.renewed_at)]  # fmt: skip
    times = [t for t in newest if t is not None]
    return {"revision": current_revision(database.engine), "head": head_revision(), "site": stored_site_id(database),
            "jobs": jobs, "live_attempts": live,
            "as_of": max(times).isoformat(timespec="seconds") if times else None}  # fmt: skip


def _size(size: int) -> str:
    for unit in ("B", "KiB", "MiB", "GiB"):
        if size < 1024 or unit == "GiB":
            return f"{size:.0f} {unit}" if unit == "B" else f"{size:.1f} {unit}"
        size /= 1024  # type: ignore[assignment]
    return f"{size} B"
