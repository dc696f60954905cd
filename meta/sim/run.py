"""run: one simulation from names (trace path, cluster ref, policy) to a report dict."""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from meta.sim import metrics, policies
from meta.sim.cluster import ClusterSpec, load_cluster
from meta.sim.config import SimConfig
from meta.sim.engine import WARMUP_TOO_LONG, Engine, EngineResult, Router
from meta.sim.federation import racing
from meta.sim.trace import compress_arrivals, load_trace


@dataclass(slots=True)
class RunSpec:
    """RunSpec names everything one run needs."""

    trace: str | Path
    cluster: str
    policy: str
    load: float = 1.0
    scale: float = 1.0
    max_jobs: int | None = None
    config: SimConfig = field(default_factory=SimConfig)
    policy_config: Any = None  # metasched's SchedulerConfig; None = meta.sim.tuning (baselines: their own)
    # several Slurm clusters (issue 26): confine each job at submit (meta.sim.routing), or race one policy
    # instance per cluster (meta.sim.federation; the baselines always race on a multi-cluster site)
    router: Router | None = None
    racing: bool = False


@dataclass(slots=True)
class RunOutcome:
    """RunOutcome is the report (JSON-ready) plus the raw engine result for plots."""

    report: dict[str, Any]
    raw: EngineResult


def contention_note(load: float, scale: float) -> str:
    """contention_note says how contention was produced: arrival compression or a smaller cluster."""
    parts = []
    if load != 1:
        parts.append(f"arrivals compressed ×{load:g} (--load)")
    if scale != 1:
        parts.append(f"cluster scaled ×{scale:g} (--scale)")
    return "; ".join(parts) or "trace timing and cluster as given"


def prepare(spec: RunSpec) -> tuple[list, list[float], ClusterSpec, list[str]]:
    """prepare loads the trace and cluster and applies load compression; returns notes too."""
    jobs, load_report = load_trace(spec.trace, spec.max_jobs)
    cluster = load_cluster(spec.cluster, spec.scale)
    originals = [job.submit_time for job in jobs]
    return compress_arrivals(jobs, spec.load), originals, cluster, list(load_report.notes)


def run(spec: RunSpec, progress: Callable[[int], None] | None = None, prepared=None) -> RunOutcome:
    """run simulates one policy and returns its report."""
    policy_fn, default_config = policies.resolve(spec.policy)
    jobs, originals, cluster, notes = prepared or prepare(spec)
    ours = policies.canonical(spec.policy) == "metasched"
    policy_config = spec.policy_config if ours and spec.policy_config is not None else default_config
    clusters = cluster.cluster_names()
    # the baselines know one cluster: on several, each cluster runs its own instance and jobs race (federation)
    races = spec.racing or (bool(clusters) and not ours)
    if races:
        policy_fn = racing(policy_fn)
    engine = Engine(jobs, cluster, policy_fn, policy_config, spec.config, originals, progress, router=spec.router)
    raw = engine.run()
    weights = dict(cluster.tenants) | dict(spec.config.tenant_weights)
    warmup = cluster.warmup_hours if spec.config.warmup_hours is None else spec.config.warmup_hours
    report = {
        "policy": policies.canonical(spec.policy),
        "trace": str(spec.trace),
        "cluster": {
            "name": cluster.name,
            "nodes": cluster.node_count(),
            "gpus": cluster.total_gpus(),
            "scale": cluster.scale,
        },
        "load": spec.load,
        "contention": contention_note(spec.load, spec.scale),
        "warmup_hours": warmup,
        "estimate": spec.config.estimate,
        "notes": notes + raw.notes + [
            _warmup_note(warmup, raw),
            f"runtime estimate: {_estimate_note(spec.config)} — the same for every policy",
            _cycle_note(spec.config),
        ],
        "metrics": metrics.compute(raw, weights),
    }
    if clusters:  # only a multi-cluster site says so: one-cluster reports stay as they were
        report["cluster"]["clusters"] = clusters
        report["notes"].append(_clusters_note(clusters, races, spec))
    return RunOutcome(report, raw)


def _clusters_note(clusters: list[str], races: bool, spec: RunSpec) -> str:
    """_clusters_note says how a multi-cluster site was scheduled: one policy, racing, confinement, outages."""
    how = ("one policy instance per cluster, every job queued on all, the first start wins (racing)" if races
           else "one policy over all clusters, a gang never spans two")
    parts = [f"{len(clusters)} Slurm clusters ({', '.join(clusters)}): {how}"]
    if spec.router is not None:
        parts.append("each job confined to clusters at submit")
    parts += [f"{o.cluster} dark {o.start / 3600:g}-{o.end / 3600:g} h" for o in spec.config.outages]
    return "; ".join(parts)


def _warmup_note(warmup_hours: float, raw: EngineResult) -> str:
    """_warmup_note says what the warm-up excluded — or that every job was measured."""
    if WARMUP_TOO_LONG in raw.notes or not warmup_hours:
        return "no warm-up: every job is measured"
    return f"first {warmup_hours:g} h of arrivals (trace time) excluded from metrics (warm-up)"


def _cycle_note(config: SimConfig) -> str:
    """_cycle_note says when the policy decides (the daemon's period model)."""
    grid = f"on a {config.cycle_interval_s:g} s grid (the daemon's period)" if config.cycle_interval_s else "at once"
    idle = f", and every {config.idle_cycle_s:g} s while work waits" if config.idle_cycle_s else ""
    return f"decisions at arrivals and completions {grid}{idle}"


def _estimate_note(config: SimConfig) -> str:
    """_estimate_note describes the runtime estimate rule."""
    if config.estimate == "noise":
        return f"duration × {config.noise_factor:g}"
    return "duration rounded up to a time-limit bucket (30 min … 30 days)"
