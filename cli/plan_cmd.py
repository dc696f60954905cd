"""``metasched plan``: the site's own jobs as a trace (``history``), replayed (``calibrate``), asked what-if (``what-if``, ``need``); an admin's store command, like ``db``."""

from __future__ import annotations

import os
import sys
from collections.abc import Callable
from dataclasses import dataclass, replace
from datetime import datetime
from pathlib import Path
from typing import Any, TypeVar

import click
from sqlalchemy import inspect
from sqlalchemy.engine import make_url
from sqlalchemy.orm import Session

from cli.context import CliState, pass_state
from cli.errors import EXIT_ERROR, fail, handle_errors
from cli.output import echo_json, table
from cli.plan_report import need_text, none_met, what_if_text
from meta.config.period import DEFAULT_PERIOD_S
from meta.config.policy_file import PolicyFileError, load_policy_config
from meta.model.durations import utcnow
from meta.model.errors import InvalidRequest
from meta.plan.anonymize import anonymized
from meta.plan.calibrate import MIN_JOBS, Calibration, Pair, compare, replay
from meta.plan.history import HistoryExport, history_rows
from meta.plan.need import need, parse_goal, parse_node_type
from meta.plan.scenario import (
    MAX_SCENARIO_FILE_BYTES,
    MAX_SCENARIOS,
    Inputs,
    Scenario,
    check_names,
    scenario,
    scenarios_from_text,
)
from meta.plan.site import Site, binding_quotas, read_site, site_cluster
from meta.plan.trace_csv import write_trace
from meta.plan.what_if import Comparison, figures, what_if
from meta.plan.window import MAX_WINDOW_DAYS, parse_window
from meta.sim import policies
from meta.sim.cluster import ClusterError, ClusterSpec, load_cluster
from meta.sim.engine import SimulationError
from meta.sim.plot import PlotError
from meta.sim.policies import PolicyFn
from meta.store import plan_reports
from meta.store.db import Database, redact, resolve_url
from meta.store.migrate import current_revision
from meta.store.models import PlanReport
from tenants.identity import effective_user

RULES = (
    "rows are tasks of jobs submitted in the window; submit_time = when the task became eligible "
    "(submit, begin, dependency satisfied, last release), seconds from --since; duration_s = run time of its "
    "started attempts; tasks not ended at the cut are kept with run time up to it (censored=1); "
    "tasks never started before the cut are skipped and counted"
)
T = TypeVar("T")
F = TypeVar("F", bound=Callable[..., Any])
OPTIONS_SCENARIO = "scenario"  # the name of the scenario the command's options form
DEFAULT_HORIZON = "90d"
DEFAULT_MAX_NODES = 64
# a live daemon records a cycle every period: a last cycle older than this means it had stopped
STOPPED_AFTER_S = 60.0
AVAILABLE = "available"  # --cluster: the stored inventory without its drained or unhealthy nodes
MAX_LAUNCH_DELAY_S = 3600.0  # --launch-delay: a launch through Slurm longer than an hour is no launch delay


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
        # decision → Slurm's RUNNING, the median over the window's started attempts (what the replays simulate)
        "launch_delay_s": round(export.launch_delay_s, 3),
        "launch_attempts": export.launch_attempts,
        "rules": RULES,
    }


def _summary_line(export: HistoryExport, where: str) -> str:
    """_summary_line is the one-line report for people."""
    skipped = export.skipped_never_started + export.skipped_bad_spec
    return (f"{len(export.rows)} rows ({export.censored} censored: still running or waiting to retry at the cut, "
            f"run time up to it) from {export.jobs} jobs submitted {export.since:%Y-%m-%dT%H:%M:%SZ} – "
            f"{export.until:%Y-%m-%dT%H:%M:%SZ}; {skipped} tasks skipped (never started: "
            f"{export.skipped_never_started}, unreadable spec: {export.skipped_bad_spec}); launch delay "
            f"(decision → RUNNING) {export.launch_delay_s:.2f} s, the median of {export.launch_attempts} started "
            f"attempts -> {where}")


def _save_option(default: str) -> Callable[[F], F]:
    """_save_option adds ``--save [NAME]``: store the report (and its plots) for ``plan reports`` and the web view."""
    return click.option(
        "--save", "save_name", is_flag=False, flag_value="", default=None, metavar="[NAME]",
        help=f"Also store the report (the --json figures, and its plots) in the store under NAME (default: {default}; "
             f"at most {plan_reports.MAX_NAME_CHARS} characters); `metasched plan reports` and the web view's "
             f"Capacity page show it. The newest {plan_reports.KEEP_PER_KIND} of each kind are kept.")


def _replay_options(func: F) -> F:
    """_replay_options adds the options of every command that replays the window: window, policy, period, cluster."""
    options = [
        click.option("--since", required=True, help="Start: a duration ago (14d, 12h, 30m) or an ISO date (UTC)."),
        click.option("--until", default=None, help="End (exclusive): a duration ago or an ISO date. Default: now."),
        click.option("--policy-config", type=click.Path(dir_okay=False), default=None,
                     help="The policy file the daemon ran with (default: the shipped defaults)."),
        click.option("--period", type=float, default=DEFAULT_PERIOD_S, show_default=True,
                     help="The daemon's period (s)."),
        click.option("--cluster", default=None,
                     help="Preset, cluster YAML or NxG instead of the stored inventory (needed when none is stored); "
                          "'available': the stored inventory without the nodes drained or down when it was saved."),
        click.option("--min-jobs", type=int, default=MIN_JOBS, show_default=True,
                     help="Compare tenants with at least this many replayed jobs."),
        click.option("--launch-delay", type=float, default=None, metavar="S",
                     help="Seconds from a decision to Slurm's RUNNING in every replay (the GPUs are held from the "
                          "decision); 0 turns the launch off. Default: measured, the median over the window's "
                          "started attempts."),
    ]
    for option in reversed(options):
        func = option(func)
    return func


@dataclass
class _Replayable:
    """_Replayable is what a replay of the window needs: the rows, the site, the cluster, the policy, and their story."""

    export: HistoryExport
    site: Site
    cluster: ClusterSpec
    policy: PolicyFn
    config: Any
    period_s: float
    min_jobs: int
    context: dict[str, Any]  # window, jobs, cluster, policy, period, launch delay: the head of every report
    notes: list[str]  # what the replay leaves out: quotas it does not apply, a daemon that had stopped
    launch_delay_s: float  # decision → start in every replay: --launch-delay, else the window's measured one

    def inputs(self) -> Inputs:
        """inputs is the window as a scenario's starting point."""
        window_s = (self.export.cut - self.export.since).total_seconds()
        return Inputs(list(self.export.rows), self.cluster, self.site.weights(), self.config, window_s)


def _replayable(state: CliState, since: str, until: str | None, policy_config: str | None, period: float,
                cluster: str | None, min_jobs: int, launch_delay: float | None) -> _Replayable:
    """_replayable checks the replay options and reads the window and the site (exit 2 on bad input or no rows)."""
    now = utcnow()
    start, end = parse_window(since, until, now)
    if not period > 0 or min_jobs < 1:
        raise InvalidRequest("--period must be positive and --min-jobs at least 1")
    if launch_delay is not None and not 0 <= launch_delay <= MAX_LAUNCH_DELAY_S:  # NaN fails too
        raise InvalidRequest(f"--launch-delay must be from 0 to {MAX_LAUNCH_DELAY_S:g} seconds")
    policy_fn, config = policies.resolve("metasched")
    try:
        config = load_policy_config(policy_config, config) if policy_config else config
        given = load_cluster(cluster) if cluster and cluster != AVAILABLE else None
    except (PolicyFileError, ClusterError) as exc:
        raise InvalidRequest(str(exc)) from None
    export, site = _in_store(state.db_url, lambda s: _window_and_site(s, start, end, now))
    spec, where = _cluster(given, cluster, site)
    if not export.rows:
        raise InvalidRequest(f"no task of the {export.jobs} jobs submitted in the window started before the cut: "
                             "nothing to replay")
    notes = [f"not simulated: {quota}" for quota in binding_quotas(site.tenants, spec)]
    if (min(end, now) - export.cut).total_seconds() > STOPPED_AFTER_S:
        notes.append(f"cut at the daemon's last cycle ({export.cut:%Y-%m-%dT%H:%M:%SZ}): "
                     "the store does not know what ran after it")
    launch = export.launch_delay_s if launch_delay is None else launch_delay
    context = {"window": {"since": export.since.isoformat(), "until": export.until.isoformat(),
                          "cut": export.cut.isoformat()},
               "jobs": export.jobs, "cluster": where, "policy": policy_config or "shipped defaults", "period_s": period,
               "launch_delay_s": round(launch, 3)}
    return _Replayable(export, site, spec, policy_fn, config, period, min_jobs, context, notes, launch)


def _simulated(run: Callable[[], T]) -> T:
    """_simulated runs simulations; a plan the simulator cannot apply is a fault of the policy, not the input: exit 1."""
    try:
        return run()
    except SimulationError as exc:
        fail(f"the policy returned a plan the simulator cannot apply: {exc}", EXIT_ERROR)
        raise  # not reached: fail exits


@plan.command("calibrate")
@_replay_options
@click.option("--json", "as_json", is_flag=True, help="Print the figures as JSON.")
@_save_option("calibration")
@pass_state
@handle_errors
def calibrate_cmd(state: CliState, since: str, until: str | None, policy_config: str | None, period: float,
                  cluster: str | None, min_jobs: int, launch_delay: float | None, as_json: bool,
                  save_name: str | None) -> None:
    """Replay the window in the simulator and put its queue delays beside the recorded ones."""
    ready = _replayable(state, since, until, policy_config, period, cluster, min_jobs, launch_delay)
    run = _simulated(lambda: replay(ready.export.rows, ready.cluster, ready.site.weights(), ready.config, period,
                                    policy=ready.policy, launch_delay_s=ready.launch_delay_s))
    result = compare(ready.export, run, min_jobs)
    result.notes.extend(ready.notes)
    if save_name is not None:
        today = Comparison(result, figures("today", run, ready.cluster), run)
        _save(state, "calibrate", save_name or "calibration", ready.context | result.as_dict(), today)
    if as_json:
        echo_json(ready.context | result.as_dict())
    else:
        click.echo(_calibration_text(result, ready.export, ready.context))


@plan.command("what-if")
@_replay_options
@click.option("--add-nodes", multiple=True, metavar="TYPE:GPUSxCOUNT",
              help="Add COUNT nodes of GPUS GPUs of TYPE, shaped like the site's (h100:8x4). Repeatable.")
@click.option("--remove-nodes", multiple=True, metavar="TYPE:[GPUSx]COUNT",
              help="Remove COUNT nodes of TYPE (a100:2; a100:8x2: of 8 GPUs only). Repeatable.")
@click.option("--share", multiple=True, metavar="TENANT=WEIGHT", help="Set a tenant's fair-share weight. Repeatable.")
@click.option("--demand", multiple=True, metavar="TENANT=FACTOR",
              help="Scale a tenant's jobs (0-10; *=FACTOR: every tenant). Repeatable.")
@click.option("--trend", is_flag=True, help="Grow demand by the window's linear trend in jobs per day.")
@click.option("--horizon", default=None, help="How far past the window --trend projects (default 90d).")
@click.option("--scenario-policy", type=click.Path(dir_okay=False), default=None,
              help="The scenario's policy file (over --policy-config's settings).")
@click.option("--name", default=OPTIONS_SCENARIO, show_default=True, help="The name of the options' scenario.")
@click.option("--scenario-file", type=click.Path(dir_okay=False), default=None,
              help=f"More scenarios side by side: a TOML ([[scenario]]) or YAML (scenarios:) list, at most "
                   f"{MAX_SCENARIOS}.")
@click.option("--plot", "plot_dir", type=click.Path(file_okay=False), default=None,
              help="Write PNGs here: per-tenant queue-delay CDFs, utilization over time.")
@click.option("--json", "as_json", is_flag=True, help="Print the comparison as JSON.")
@_save_option("the scenarios' names")
@pass_state
@handle_errors
def what_if_cmd(state: CliState, since: str, until: str | None, policy_config: str | None, period: float,
                cluster: str | None, min_jobs: int, launch_delay: float | None, add_nodes: tuple[str, ...],
                remove_nodes: tuple[str, ...],
                share: tuple[str, ...], demand: tuple[str, ...], trend: bool, horizon: str | None,
                scenario_policy: str | None, name: str, scenario_file: str | None, plot_dir: str | None,
                as_json: bool, save_name: str | None) -> None:
    """Replay the window as it was (today) and under each scenario, side by side."""
    if horizon is not None and not trend:
        raise InvalidRequest("--horizon goes with --trend")
    found: list[Scenario] = []
    if add_nodes or remove_nodes or share or demand or trend or scenario_policy:
        found.append(scenario(name, add=add_nodes, remove=remove_nodes, share=share, demand=demand,
                              horizon=(horizon or DEFAULT_HORIZON) if trend else None, policy_file=scenario_policy))
    elif name != OPTIONS_SCENARIO:
        raise InvalidRequest("--name names the scenario of --add-nodes, --remove-nodes, --share, --demand, --trend, "
                             "--scenario-policy: give one of them")
    if scenario_file:
        found.extend(_scenario_file(Path(scenario_file)))
    check_names(found)
    ready = _replayable(state, since, until, policy_config, period, cluster, min_jobs, launch_delay)
    found = [_with_policy(each, ready.config) for each in found]
    result = _simulated(lambda: what_if(ready.export, ready.inputs(), found, period, policy=ready.policy,
                                        min_jobs=min_jobs, launch_delay_s=ready.launch_delay_s))
    result.notes.extend(ready.notes)
    if plot_dir:
        _plots(result, plot_dir)
    if save_name is not None:
        default = ", ".join(outcome.scenario.name for outcome in result.outcomes) or "today"
        _save(state, "what-if", save_name or default[:plan_reports.MAX_NAME_CHARS], ready.context | result.as_dict(),
              result)
    if as_json:
        echo_json(ready.context | result.as_dict())
    else:
        click.echo(what_if_text(result, ready.export, ready.context))


@plan.command("need")
@_replay_options
@click.option("--p95", "p95_goals", multiple=True, metavar="TENANT<=DURATION",
              help="Goal: the tenant's p95 queue delay at most DURATION (tenant-a<=1h; *: every job). Repeatable.")
@click.option("--mean", "mean_goals", multiple=True, metavar="TENANT<=DURATION",
              help="Goal: the tenant's mean queue delay at most DURATION. Repeatable.")
@click.option("--node-type", "node_types", multiple=True, metavar="TYPE:GPUS",
              help="The nodes that may be added (h100:8), shaped like the site's. Repeatable: each is searched.")
@click.option("--max-nodes", type=int, default=DEFAULT_MAX_NODES, show_default=True,
              help="Search up to this many added nodes of a type.")
@click.option("--json", "as_json", is_flag=True, help="Print the search as JSON.")
@_save_option("need")
@pass_state
@handle_errors
def need_cmd(state: CliState, since: str, until: str | None, policy_config: str | None, period: float,
             cluster: str | None, min_jobs: int, launch_delay: float | None, p95_goals: tuple[str, ...],
             mean_goals: tuple[str, ...],
             node_types: tuple[str, ...], max_nodes: int, as_json: bool, save_name: str | None) -> None:
    """Find the fewest added nodes of an offered type whose replay of the window meets every goal."""
    goals = [parse_goal("p95", text) for text in p95_goals] + [parse_goal("mean", text) for text in mean_goals]
    offered = [parse_node_type(text) for text in node_types]
    if not goals or not offered:
        raise InvalidRequest("give at least one goal (--p95 or --mean TENANT<=DURATION) and one --node-type TYPE:GPUS")
    ready = _replayable(state, since, until, policy_config, period, cluster, min_jobs, launch_delay)
    result = _simulated(lambda: need(ready.export, ready.inputs(), goals, offered, max_nodes, period,
                                     policy=ready.policy, min_jobs=min_jobs, launch_delay_s=ready.launch_delay_s))
    if save_name is not None:  # no plots: the search's replays are not kept
        _save(state, "need", save_name or "need", ready.context | result.as_dict(), None)
    if as_json:
        echo_json(ready.context | result.as_dict())
    else:
        click.echo(need_text(result, ready.export, ready.context))
    if result.best is None:
        fail(none_met(result), EXIT_ERROR)


def _scenario_file(path: Path) -> list[Scenario]:
    """_scenario_file reads a bounded scenario file; its policy files are named relative to it."""
    try:
        with path.open("rb") as handle:
            data = handle.read(MAX_SCENARIO_FILE_BYTES + 1)
        text = data.decode("utf-8")
    except OSError as exc:
        raise InvalidRequest(f"--scenario-file {path}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise InvalidRequest(f"--scenario-file {path}: not UTF-8 text") from None
    found = scenarios_from_text(text, str(path))
    return [replace(each, policy_file=str(path.parent / each.policy_file)) if each.policy_file else each
            for each in found]


def _with_policy(found: Scenario, today: Any) -> Scenario:
    """_with_policy loads a scenario's policy file over today's settings."""
    if not found.policy_file:
        return found
    try:
        return replace(found, policy_config=load_policy_config(found.policy_file, today))
    except PolicyFileError as exc:
        raise InvalidRequest(f"scenario {found.name!r}: {exc}") from None


def _plots(result: Comparison, folder: str) -> None:
    """_plots writes the what-if's PNGs or fails in one line."""
    from meta.plan.plots import write_plots  # matplotlib only when asked for

    try:
        written = write_plots(result, folder)
    except PlotError as exc:
        fail(str(exc), EXIT_ERROR)
        return
    click.echo("plots written: " + ", ".join(str(path) for path in written), err=True)


def _save(state: CliState, kind: str, name: str, report: dict[str, Any], plotted: Comparison | None) -> None:
    """_save stores the report with its plots (rendered in memory) and says where on stderr (stdout stays the report).

    The name and the sizes are checked before anything is simulated again or written; a store whose schema is behind
    (no plan_reports table yet) is refused with what to run.
    """
    name = plan_reports.check_name(name)
    plan_reports.encoded(report)
    plots: list[plan_reports.Plot] = []
    if plotted is not None:
        from meta.plan.plots import AUDIENCE, render_plots  # matplotlib only when saving

        try:
            plots = [plan_reports.Plot(file, AUDIENCE[file], png) for file, png in render_plots(plotted)]
        except PlotError as exc:
            fail(str(exc), EXIT_ERROR)
    actor = effective_user()  # the audit's actor is the effective user, never LOGNAME

    def store(session: Session) -> plan_reports.SavedReport:
        if not inspect(session.connection()).has_table(PlanReport.__tablename__):
            raise InvalidRequest("the store's schema is behind this version (no plan_reports): run "
                                 "`metasched db upgrade` first")
        return plan_reports.save(session, kind, name, report, plots, actor=actor, uid=os.geteuid())

    saved = _in_store(state.db_url, store)
    click.echo(f"saved as plan report {saved.id} ({saved.kind} {saved.name!r}, {len(plots)} plots): "
               f"metasched plan report {saved.id}", err=True)


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
    nodes = [node for node in site.nodes if node.schedulable()] if ref == AVAILABLE else site.nodes
    if not nodes:
        raise InvalidRequest("no node of the stored inventory was schedulable when it was saved")
    spec = site_cluster(nodes, site.switch_parent)
    saved = f", saved {site.inventory_at:%Y-%m-%dT%H:%M:%SZ}" if site.inventory_at else ""
    which = "stored inventory, schedulable nodes" if ref == AVAILABLE else "stored inventory"
    return spec, f"{which} ({spec.node_count()} nodes, {spec.total_gpus()} GPUs{saved})"


def _calibration_text(result: Calibration, export: HistoryExport, context: dict[str, object]) -> str:
    """_calibration_text is the report for people: a table per tenant, then overall, utilization, verdict, notes."""
    head = (f"{result.rows} rows ({result.censored} censored) of {export.jobs} jobs submitted "
            f"{export.since:%Y-%m-%dT%H:%M:%SZ} – {export.until:%Y-%m-%dT%H:%M:%SZ}; cluster: {context['cluster']}; "
            f"policy: {context['policy']}; period {context['period_s']:g} s; launch {context['launch_delay_s']:.2f} s")
    rows = [[fit.tenant, fit.jobs, *_pair_cells(fit.mean), *_pair_cells(fit.p95)] for fit in result.tenants]
    rows.append(["overall", result.replayed, *_pair_cells(result.mean), *_pair_cells(result.p95)])
    headers = ["tenant", "jobs", "real mean", "sim mean", "error", "real p95", "sim p95", "error"]
    busy = result.utilization
    lines = [head, "", table(headers, rows), "",
             f"GPU utilization: recorded {busy.real:.1%}, simulated {busy.sim:.1%} ({_error(busy.error)}); "
             f"span recorded {result.span_s.real:.0f} s, simulated {result.span_s.sim:.0f} s"]
    if result.waiting is not None:  # shortage or fragmentation (issue 23), before the verdict and its notes
        lines += ["", "simulated waiting by cause (GPU-hours, % of the waiting):",
                  table(result.waiting.HEADERS, result.waiting.rows()), result.waiting.stranded_line(), ""]
    lines.append(f"verdict: {result.verdict()}")
    return "\n".join(lines + [f"  - {note}" for note in result.notes])


def _pair_cells(pair: Pair) -> list[str]:
    """_pair_cells is a pair's recorded, simulated and error cells."""
    return [f"{pair.real:.1f} s", f"{pair.sim:.1f} s", _error(pair.error)]


def _error(error: float | None) -> str:
    """_error prints a relative error as a signed percentage, ``n/a`` without one."""
    return "n/a" if error is None else f"{error:+.0%}"
