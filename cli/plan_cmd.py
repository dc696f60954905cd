"""``metasched plan history``: the site's own jobs as a trace ``metasched simulate`` replays (an admin's store command, like ``db``)."""

from __future__ import annotations

import sys
from datetime import datetime
from pathlib import Path

import click
from sqlalchemy.engine import make_url

from cli.context import CliState, pass_state
from cli.errors import handle_errors
from cli.output import echo_json
from meta.model.durations import utcnow
from meta.model.errors import InvalidRequest
from meta.plan.anonymize import anonymized
from meta.plan.history import HistoryExport, history_rows
from meta.plan.trace_csv import write_trace
from meta.plan.window import MAX_WINDOW_DAYS, parse_window
from meta.store.db import Database, redact, resolve_url
from meta.store.migrate import current_revision

RULES = (
    "rows are tasks of jobs submitted in the window; submit_time = when the task became eligible "
    "(submit, begin, dependency satisfied, last release), seconds from --since; duration_s = run time of its "
    "started attempts; tasks not ended at the cut are kept with run time up to it (censored=1); "
    "tasks never started before the cut are skipped and counted"
)


@click.group("plan")
def plan() -> None:
    """Capacity planning from the site's own history (as traces the simulator replays)."""


@plan.command("history")
@click.option("--since", required=True, help="Start: a duration ago (14d, 12h, 30m) or an ISO date (UTC).")
@click.option("--until", default=None, help="End (exclusive): a duration ago or an ISO date. Default: now.")
@click.option("-o", "--output", type=click.Path(dir_okay=False, writable=True), default=None,
              help="Write the CSV here (default: stdout).")
@click.option("--anonymize", is_flag=True, help="Replace tenants, users, job names and ids by a keyed hash (key not kept).")
@click.option("--json", "as_json", is_flag=True, help="Print a summary as JSON (the CSV needs -o).")
@pass_state
@handle_errors
def history(state: CliState, since: str, until: str | None, output: str | None, anonymize: bool, as_json: bool) -> None:
    """Export the jobs submitted in a window as a trace CSV for `metasched simulate --trace`."""
    now = utcnow()
    start, end = parse_window(since, until, now)
    if as_json and output is None:
        raise InvalidRequest("--json prints a summary: give -o FILE for the CSV")
    export = _read(state.db_url, start, end, now)
    if anonymize:
        export = anonymized(export)
    if output is None:
        write_trace(export.rows, sys.stdout)
        click.echo(_summary_line(export, "stdout"), err=True)  # stderr: stdout is the CSV
        return
    _write(export, Path(output))
    if as_json:
        echo_json(_summary(export, output, anonymize))
    else:
        click.echo(_summary_line(export, output))


def _read(db_url: str | None, since: datetime, until: datetime, now: datetime) -> HistoryExport:
    """_read opens the named store without creating one and exports the window in one read transaction."""
    url = resolve_url(db_url)
    parsed = make_url(url)
    if parsed.get_backend_name() == "sqlite" and parsed.database not in (None, "", ":memory:"):
        if not Path(parsed.database).expanduser().is_file():  # a read never creates an empty store
            raise InvalidRequest(f"no store at {redact(url)} (give --db or METASCHED_DB)")
    database = Database(url)
    try:
        if current_revision(database.engine) is None:
            raise InvalidRequest(f"{redact(url)} has no metasched schema (run `metasched db upgrade`)")
        with database.session() as session:
            return history_rows(session, since, until, now)
    finally:
        database.dispose()


def _write(export: HistoryExport, path: Path) -> None:
    """_write writes the CSV next to its final name and renames it: a reader never sees half a trace."""
    partial = path.with_name(path.name + ".partial")
    try:
        with partial.open("w", encoding="utf-8", newline="") as handle:
            write_trace(export.rows, handle)
        partial.replace(path)
    except OSError as exc:
        partial.unlink(missing_ok=True)
        raise InvalidRequest(f"cannot write {path}: {exc.strerror or exc}") from None


def _summary(export: HistoryExport, path: str, anonymize: bool) -> dict[str, object]:
    """_summary is the --json report: counts, window, the file and the rules."""
    return {
        "rows": len(export.rows),
        "censored": export.censored,
        "skipped_never_started": export.skipped_never_started,
        "skipped_bad_spec": export.skipped_bad_spec,
        "jobs": export.jobs,
        "window": {"since": export.since.isoformat(), "until": export.until.isoformat(), "cut": export.cut.isoformat(),
                   "max_days": MAX_WINDOW_DAYS},
        "path": str(path),
        "anonymized": anonymize,
        "rules": RULES,
    }


def _summary_line(export: HistoryExport, where: str) -> str:
    """_summary_line is the one-line report for people."""
    skipped = export.skipped_never_started + export.skipped_bad_spec
    return (f"{len(export.rows)} rows ({export.censored} censored: still running or waiting to retry at the cut, "
            f"run time up to it) from {export.jobs} jobs submitted {export.since:%Y-%m-%dT%H:%M:%SZ} – "
            f"{export.until:%Y-%m-%dT%H:%M:%SZ}; {skipped} tasks skipped (never started: "
            f"{export.skipped_never_started}, unreadable spec: {export.skipped_bad_spec}) -> {where}")
