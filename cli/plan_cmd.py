"""``metasched plan history``: the site's own jobs as a trace ``metasched simulate`` replays (an admin's store command, like ``db``)."""

from __future__ import annotations

import sys
from collections.abc import Callable
from datetime import datetime
from pathlib import Path
from typing import TypeVar

import click
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from cli.context import CliState, pass_state
from cli.errors import EXIT_ERROR, fail, handle_errors
from cli.output import echo_json, table
from meta.config.period import DEFAULT_PERIOD_S
from meta.config.policy_file import PolicyFileError, load_policy_config
from meta.model.durations import utcnow
from meta.model.errors import InvalidRequest
from meta.plan.anonymize import anonymized
from meta.plan.calibrate import MIN_JOBS, Calibration, Pair, calibrate
from meta.plan.history import HistoryExport, history_rows
from meta.plan.site import Site, binding_quotas, read_site, site_cluster
from meta.plan.trace_csv import write_trace
from meta.plan.window import MAX_WINDOW_DAYS, parse_window
from meta.sim import policies
from meta.sim.cluster import ClusterError, ClusterSpec, load_cluster
from meta.sim.engine import SimulationError
from meta.store.db import Database, redact, resolve_url
from meta.store.migrate import current_revision

RULES = (
    "rows are tasks of jobs submitted in the window; submit_time = when the task became eligible "
    "(submit, begin, dependency satisfied, last release), seconds from --since; duration_s = run time of its "
    "started attempts; tasks not ended at the cut are kept with run time up to it (censored=1); "
    "tasks never started before the cut are skipped and counted"
)
T = TypeVar("T")
# a live daemon records a cycle every period: a last cycle older than this means it had stopped
STOPPED_AFTER_S = 60.0


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
    return _in_store(db_url, lambda session: history_rows(session, since, until, now))


def _in_store(db_url: str | None, read: Callable[[Session], T]) -> T:
    """_in_store opens the named store without creating one and runs ``read`` in one read transaction."""
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
            return read(session)
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


@plan.command("calibrate")
@click.option("--since", required=True, help="Start: a duration ago (14d, 12h, 30m) or an ISO date (UTC).")
@click.option("--until", default=None, help="End (exclusive): a duration ago or an ISO date. Default: now.")
@click.option("--policy-config", type=click.Path(dir_okay=False), default=None,
              help="The policy file the daemon ran with (default: the shipped defaults).")
@click.option("--period", type=float, default=DEFAULT_PERIOD_S, show_default=True, help="The daemon's period (s).")
@click.option("--cluster", default=None,
              help="Preset, cluster YAML or NxG instead of the stored inventory (needed when none is stored).")
@click.option("--min-jobs", type=int, default=MIN_JOBS, show_default=True,
              help="Compare tenants with at least this many replayed jobs.")
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@pass_state
@handle_errors
def calibrate_cmd(state: CliState, since: str, until: str | None, policy_config: str | None, period: float,
                  cluster: str | None, min_jobs: int, as_json: bool) -> None:
    """Replay the window in the simulator and put its queue delays beside the recorded ones."""
    now = utcnow()
    start, end = parse_window(since, until, now)
    if not period > 0 or min_jobs < 1:
        raise InvalidRequest("--period must be positive and --min-jobs at least 1")
    policy_fn, config = policies.resolve("metasched")
    try:
        config = load_policy_config(policy_config, config) if policy_config else config
        given = load_cluster(cluster) if cluster else None
    except (PolicyFileError, ClusterError) as exc:
        raise InvalidRequest(str(exc)) from None
    export, site = _in_store(state.db_url, lambda s: _window_and_site(s, start, end, now))
    spec, where = _cluster(given, cluster, site)
    if not export.rows:
        raise InvalidRequest(f"no task of the {export.jobs} jobs submitted in the window started before the cut: "
                             "nothing to replay")
    try:
        result = calibrate(export, spec, site.weights(), config, period, min_jobs=min_jobs, policy=policy_fn)
    except SimulationError as exc:  # a fault of the policy or the simulator, not of the input: exit 1
        fail(f"the policy returned a plan the simulator cannot apply: {exc}", EXIT_ERROR)
    result.notes.extend(f"not simulated: {quota}" for quota in binding_quotas(site.tenants, spec))
    if (min(end, now) - export.cut).total_seconds() > STOPPED_AFTER_S:
        result.notes.append(f"cut at the daemon's last cycle ({export.cut:%Y-%m-%dT%H:%M:%SZ}): "
                            "the store does not know what ran after it")
    context = {"window": {"since": export.since.isoformat(), "until": export.until.isoformat(),
                          "cut": export.cut.isoformat()},
               "jobs": export.jobs, "cluster": where, "policy": policy_config or "shipped defaults", "period_s": period}
    if as_json:
        echo_json(context | result.as_dict())
    else:
        click.echo(_calibration_text(result, export, context))


def _window_and_site(session: Session, since: datetime, until: datetime, now: datetime) -> tuple[HistoryExport, Site]:
    """_window_and_site reads the site and the window as the store stood at its last cycle (now if none is recorded).

    A stopped daemon's store would otherwise count its still-running tasks as running until now.
    """
    site = read_site(session)
    seen = min(now, site.last_cycle_at) if site.last_cycle_at else now
    return history_rows(session, since, until, seen), site


def _cluster(given: ClusterSpec | None, ref: str | None, site: Site) -> tuple[ClusterSpec, str]:
    """_cluster is the simulated cluster and where it came from: --cluster, else the stored inventory."""
    if given is not None:
        return given, f"{ref} ({given.node_count()} nodes, {given.total_gpus()} GPUs)"
    if not site.nodes:
        raise InvalidRequest("the store has no inventory (no daemon saved one): give --cluster PRESET|YAML|NxG")
    spec = site_cluster(site.nodes, site.switch_parent)
    saved = f", saved {site.inventory_at:%Y-%m-%dT%H:%M:%SZ}" if site.inventory_at else ""
    return spec, f"stored inventory ({spec.node_count()} nodes, {spec.total_gpus()} GPUs{saved})"


def _calibration_text(result: Calibration, export: HistoryExport, context: dict[str, object]) -> str:
    """_calibration_text is the report for people: a table per tenant, then overall, utilization, verdict, notes."""
    head = (f"{result.rows} rows ({result.censored} censored) of {export.jobs} jobs submitted "
            f"{export.since:%Y-%m-%dT%H:%M:%SZ} – {export.until:%Y-%m-%dT%H:%M:%SZ}; cluster: {context['cluster']}; "
            f"policy: {context['policy']}; period {context['period_s']:g} s")
    rows = [[fit.tenant, fit.jobs, *_pair_cells(fit.mean), *_pair_cells(fit.p95)] for fit in result.tenants]
    rows.append(["overall", result.replayed, *_pair_cells(result.mean), *_pair_cells(result.p95)])
    headers = ["tenant", "jobs", "real mean", "sim mean", "error", "real p95", "sim p95", "error"]
    busy = result.utilization
    lines = [head, "", table(headers, rows), "",
             f"GPU utilization: recorded {busy.real:.1%}, simulated {busy.sim:.1%} ({_error(busy.error)}); "
             f"span recorded {result.span_s.real:.0f} s, simulated {result.span_s.sim:.0f} s",
             f"verdict: {result.verdict()}"]
    return "\n".join(lines + [f"  - {note}" for note in result.notes])


def _pair_cells(pair: Pair) -> list[str]:
    """_pair_cells is a pair's recorded, simulated and error cells."""
    return [f"{pair.real:.1f} s", f"{pair.sim:.1f} s", _error(pair.error)]


def _error(error: float | None) -> str:
    """_error prints a relative error as a signed percentage, ``n/a`` without one."""
    return "n/a" if error is None else f"{error:+.0%}"
