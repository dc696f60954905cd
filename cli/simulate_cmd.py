"""``metasched simulate``: replay a trace on a simulated cluster under one or more policies."""

from __future__ import annotations

import json
import sys
from collections.abc import Callable
from pathlib import Path

import click

from meta.config.period import DEFAULT_IDLE_CYCLE_S, DEFAULT_PERIOD_S
from meta.config.policy_file import PolicyFileError, load_policy_config
from meta.sim import policies
from meta.sim.cluster import ClusterError
from meta.sim.config import SimConfig
from meta.sim.engine import SimulationError
from meta.sim.report import group_table, human_table, notes, tenant_table
from meta.sim.run import RunOutcome, RunSpec, prepare, run
from meta.sim.tenant_delays import BASELINE, MIN_JOBS, tenant_section
from meta.sim.trace import TraceError

EXIT_ERROR, EXIT_USAGE = 1, 2


def _fail(message: str, code: int) -> None:
    """_fail prints ``metasched simulate: error: ...`` on stderr and exits with ``code``."""
    click.echo(f"metasched simulate: error: {message}", err=True)
    sys.exit(code)


def _policy_names(policy: str, compare: str | None) -> list[str]:
    """_policy_names is --compare's list (or --policy alone), canonical and de-duplicated."""
    raw = [name for name in (compare.split(",") if compare else [policy]) if name.strip()]
    names = [policies.canonical(name) for name in raw]
    return list(dict.fromkeys(names)) or [policies.canonical(policy)]


def _progress(total: int, enabled: bool) -> tuple[Callable[[int], None] | None, Callable[[], None]]:
    """_progress returns an update callback and a closer for a stderr progress bar (or nothing)."""
    if not enabled or total < 1000:
        return None, lambda: None
    bar = click.progressbar(length=total, label="simulating", file=sys.stderr)
    bar.__enter__()
    seen = [0]

    def update(done: int) -> None:
        """update advances the bar to ``done`` arrivals, at most ~200 redraws per run."""
        if done - seen[0] >= max(total // 200, 1) or done == total:
            bar.update(done - seen[0])
            seen[0] = done

    return update, lambda: bar.__exit__(None, None, None)


def _sim_config(warmup_hours: float | None, cycle_interval: float, idle_cycle: float, estimate: str,
                guarantees: float, grace: float) -> SimConfig:
    """_sim_config builds the run's SimConfig from the options."""
    return SimConfig(warmup_hours=warmup_hours, cycle_interval_s=cycle_interval, idle_cycle_s=idle_cycle,
                     estimate=estimate, strict=False, guarantee_fraction=guarantees, preemption_grace_s=grace)


def _run_all(spec: RunSpec, names: list[str], show_progress: bool) -> list[RunOutcome]:
    """_run_all prepares the trace once and simulates every policy on it."""
    prepared = prepare(spec)
    outcomes = []
    for name in names:
        spec.policy = name
        update, close = _progress(len(prepared[0]), show_progress)
        try:
            outcomes.append(run(spec, update, prepared))
        finally:
            close()
    return outcomes


@click.command("simulate")
@click.option("--trace", "trace", required=True, help="Trace CSV in the common schema (philly, pai2023, crux).")
@click.option("--cluster", required=True, help="Preset (philly, pai2023, crux), a cluster YAML file, or NxG such as 150x8.")
@click.option("--policy", default="metasched", show_default=True, help="fifo, slurm or metasched.")
@click.option("--load", type=float, default=1.0, show_default=True, help="Compress inter-arrival times by this factor.")
@click.option("--scale", type=float, default=1.0, show_default=True, help="Multiply every node group's size by this.")
@click.option("--compare", default=None, help="Comma-separated policies to run side by side, e.g. fifo,slurm,metasched.")
@click.option("--max-jobs", type=click.IntRange(min=1), default=None, help="Only the first N jobs by submit time.")
@click.option("--warmup-hours", type=click.FloatRange(min=0), default=None, help="Override the preset's warm-up.")
@click.option("--cycle-interval", type=click.FloatRange(min=0), default=DEFAULT_PERIOD_S, show_default=True,
              help="The daemon's period: arrivals and completions are decided at its next tick (0 = at once).")
@click.option("--idle-cycle", type=click.FloatRange(min=0), default=DEFAULT_IDLE_CYCLE_S, show_default=True,
              help="While work waits, decide at least this often even when nothing happens (0 = never).")
@click.option("--estimate", type=click.Choice(["bucket", "noise"]), default="bucket", show_default=True,
              help="Runtime estimate: duration rounded up to a time-limit bucket, or duration × 2.")
@click.option("--guarantees", type=click.FloatRange(min=0), default=1.0, show_default=True,
              help="Fraction of the GPUs guaranteed to tenants by weight (presets with tenant weights only).")
@click.option("--preemption-grace", type=click.FloatRange(min=0), default=0.0, show_default=True,
              help="Seconds a preempted attempt keeps its capacity before it exits.")
@click.option("--policy-config", type=click.Path(dir_okay=False), default=None,
              help="YAML of metasched policy settings over the defaults (default: the shipped defaults, which the benchmarks run).")
@click.option("--tenant-min-jobs", type=click.IntRange(min=1), default=MIN_JOBS, show_default=True,
              help="Per-tenant figures and the worst tenant ratio cover tenants with at least this many jobs.")
@click.option("--json", "as_json", is_flag=True, help="Print the same figures as JSON.")
@click.option("--plot", type=click.Path(dir_okay=False), default=None, help="Write a PNG: queue-delay CDF and utilization.")
def simulate(
    trace: str, cluster: str, policy: str, load: float, scale: float, compare: str | None, max_jobs: int | None,
    warmup_hours: float | None, cycle_interval: float, idle_cycle: float, estimate: str, guarantees: float,
    preemption_grace: float,
    policy_config: str | None, tenant_min_jobs: int, as_json: bool, plot: str | None,
) -> None:
    """simulate replays a job trace on a simulated cluster and reports queue delays, JCT, utilization."""
    if load <= 0 or scale <= 0:
        _fail("--load and --scale must be positive", EXIT_USAGE)
    try:
        names = _policy_names(policy, compare)
        spec = RunSpec(trace=trace, cluster=cluster, policy=names[0], load=load, scale=scale, max_jobs=max_jobs,
                       config=_sim_config(warmup_hours, cycle_interval, idle_cycle, estimate, guarantees, preemption_grace),
                       policy_config=load_policy_config(policy_config) if policy_config else None)
        outcomes = _run_all(spec, names, show_progress=not as_json and sys.stderr.isatty())
    except (TraceError, ClusterError, policies.PolicyError, PolicyFileError) as exc:
        _fail(str(exc), EXIT_USAGE)
    except SimulationError as exc:
        _fail(f"the policy returned a plan that cannot be applied: {exc}", EXIT_ERROR)
    reports = [o.report for o in outcomes]
    _add_tenant_delays(reports, tenant_min_jobs)
    _emit(reports, as_json)
    if plot:
        _write_plot(outcomes, plot)


def _add_tenant_delays(reports: list[dict], min_jobs: int) -> None:
    """_add_tenant_delays gives each run its per-tenant figures, beside slurm-like's when it ran too."""
    baseline = next((r for r in reports if r["policy"] == BASELINE), None)
    for report in reports:
        report["tenant_delays"] = tenant_section(report, baseline, min_jobs)


def _emit(reports: list[dict], as_json: bool) -> None:
    """_emit prints the table (with per-kind and per-tenant breakdowns and notes) or JSON."""
    if as_json:
        click.echo(json.dumps({"runs": reports}, indent=2, sort_keys=True))
        return
    click.echo(human_table(reports))
    if max(len(r["metrics"]["by_kind"]) for r in reports) > 1:
        click.echo()
        click.echo(group_table(reports, "by_kind"))
    tenants = tenant_table(reports)
    if tenants:  # tenants with enough jobs to judge; otherwise every tenant's mean / p99
        click.echo()
        click.echo(tenants)
    elif max(len(r["metrics"]["by_tenant"]) for r in reports) > 1:
        click.echo()
        click.echo(group_table(reports, "by_tenant"))
    click.echo()
    for note in notes(reports):
        click.echo(f"note: {note}")


def _write_plot(outcomes: list[RunOutcome], path: str) -> None:
    """_write_plot draws the PNG or fails with a clear message."""
    from meta.sim.plot import PlotError, write_plot

    try:
        written = write_plot(outcomes, Path(path))
    except PlotError as exc:
        _fail(str(exc), EXIT_ERROR)
    click.echo(f"plot written to {written}", err=True)
