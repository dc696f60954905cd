"""The daemon's Prometheus metrics: leadership, the leader's cycle, reconcile and Slurm calls.

Every replica serves ``/metrics`` (``--metrics-port``); ``metasched_leader`` says which one
leads. The cycle's families are the leader's alone: a replica that is not leading exports none
of the cycle gauges (they are cleared when leadership is lost), so summing or taking the max
over replicas never mixes a stale standby picture into the leader's. Gauges keyed by tenant,
state, reason or GPU type are set for every known key each period — 0 when empty — and a key
that is no longer known is removed, so no series keeps a stale value (``set_all``). Counters
keyed by tenant start at 0 for every known tenant, so ``increase()`` sees their first event.
The API's families (``meta/service/http_metrics.py``) share the registry in ``metasched serve``.
"""

from __future__ import annotations

import time
from collections.abc import Iterable, Mapping
from weakref import WeakKeyDictionary

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from slurm_bridge.call_records import CallOutcome, CallRecord

_DELAY_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, float("inf"))
_CYCLE_BUCKETS = (0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, 30, float("inf"))
# the Slurm commands the bridge runs: their error counters exist (at 0) before the first error
SLURM_COMMANDS = ("sbatch", "squeue", "sacct", "sinfo", "scontrol", "scancel", "sacctmgr", "sdiag")
_ERROR_OUTCOMES = tuple(o.value for o in CallOutcome if o != CallOutcome.OK)
DEADLINE_OUTCOMES = ("met", "missed")

Labels = tuple[str, ...]


def set_all(gauge: Gauge, values: Mapping[Labels, float]) -> None:
    """set_all sets one value per label tuple and removes the children it set last time but not now (no stale series)."""
    known = _KEYS.setdefault(gauge, set())
    for labels, value in values.items():
        gauge.labels(*labels).set(value)
    for labels in known - values.keys():
        try:
            gauge.remove(*labels)
        except KeyError:
            pass
    known.clear()
    known.update(values)


def forget_all(gauge: Gauge) -> None:
    """forget_all removes every child of a labelled gauge (and what set_all remembers of them)."""
    gauge.clear()
    _KEYS.pop(gauge, None)


# the label tuples set_all last set, per gauge (no scan of the gauge's children each period)
_KEYS: WeakKeyDictionary[Gauge, set[Labels]] = WeakKeyDictionary()


class Metrics:
    """Metrics owns one registry so tests and several daemons in a process stay apart."""

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self._last_reconcile: float | None = None  # monotonic; None while not leading
        # --- leadership (every replica)
        self.leader = Gauge("metasched_leader", "1 when this replica leads the cycle, else 0", registry=r)
        self.epoch = Gauge("metasched_leader_epoch", "Leader epoch held by this replica (0: not leading)", registry=r)
        # --- the leader's cycle: counters and histograms
        self.cycle_seconds = Histogram(
            "metasched_cycle_seconds", "Snapshot plus policy time of one leader period", buckets=_CYCLE_BUCKETS,
            registry=r,
        )  # fmt: skip
        self.queue_delay = Histogram(
            "metasched_queue_delay_seconds", "Submit-to-placement delay of placed tasks, by job kind and tenant",
            ["kind", "tenant"], buckets=_DELAY_BUCKETS, registry=r,
        )  # fmt: skip
        self.placements = Counter("metasched_placements_total", "Attempts created by the scheduler", ["tenant"], registry=r)
        self.preemptions = Counter(
            "metasched_preemptions_total", "Attempts preempted by the scheduler, by the victim's tenant", ["tenant"],
            registry=r,
        )  # fmt: skip
        self.lost_gpu_seconds = Counter(
            "metasched_preemption_lost_gpu_seconds_total",
            "GPU-seconds preemptions cost: work since the victim's last checkpoint plus its restore time, by tenant",
            ["tenant"], registry=r,
        )  # fmt: skip
        self.deadlines = Counter(
            "metasched_deadline_jobs_total",
            "Jobs with a deadline that finished successfully, by tenant and outcome (met: by the deadline)",
            ["tenant", "outcome"], registry=r,
        )  # fmt: skip
        self.reconcile_transitions = Counter(
            "metasched_reconcile_transitions_total", "Attempt transitions driven by Slurm reports", registry=r
        )
        self.orphans = Counter("metasched_orphans_cancelled_total", "Orphan Slurm jobs cancelled", registry=r)
        # --- the leader's cycle: gauges, set for every known key each period
        self.reconcile_lag = Gauge(
            "metasched_reconcile_lag_seconds", "Seconds since the leader last reconciled with Slurm", registry=r
        )
        self.reconcile_lag.set_function(self._reconcile_lag)
        self.attempts = Gauge("metasched_attempts", "Attempts by state", ["state"], registry=r)
        self.queue_depth = Gauge("metasched_queue_depth", "Pending tasks by tenant", ["tenant"], registry=r)
        self.pending_tasks = Gauge(
            "metasched_pending_tasks", "Tasks the policy left waiting this period, by tenant and typed reason",
            ["tenant", "reason"], registry=r,
        )  # fmt: skip
        self.oldest_pending = Gauge(
            "metasched_oldest_pending_seconds", "Wait since submit of the tenant's oldest waiting task (0: none)",
            ["tenant"], registry=r,
        )  # fmt: skip
        self.aging_bound = Gauge(
            "metasched_aging_bound_seconds", "The policy's aging bound (max_wait_s): past it a task outranks share order",
            registry=r,
        )  # fmt: skip
        self.overdue = Gauge(
            "metasched_deadline_overdue_tasks", "Waiting or running tasks whose job's deadline has passed", ["tenant"],
            registry=r,
        )  # fmt: skip
        tenant_type = ["tenant", "gpu_type"]
        self.allocated = Gauge(
            "metasched_tenant_allocated_gpus", "GPUs held by the tenant's live attempts (gpu_type \"*\": all types)",
            tenant_type, registry=r,
        )  # fmt: skip
        self.guaranteed = Gauge(
            "metasched_tenant_guaranteed_gpus", "The tenant's guaranteed GPUs per type (\"*\": any type)", tenant_type,
            registry=r,
        )  # fmt: skip
        self.limit = Gauge(
            "metasched_tenant_limit_gpus", "The tenant's GPU limit per type (\"*\": all types; absent: unlimited)",
            tenant_type, registry=r,
        )  # fmt: skip
        self.borrowed = Gauge(
            "metasched_tenant_borrowed_gpus", "GPUs the tenant holds beyond its guarantee (lent capacity)", tenant_type,
            registry=r,
        )  # fmt: skip
        self.weight = Gauge("metasched_tenant_weight", "The tenant's fair-share weight", ["tenant"], registry=r)
        self.usage = Gauge(
            "metasched_tenant_decayed_usage_gpu_seconds", "The tenant's decayed, cost-weighted GPU-seconds", ["tenant"],
            registry=r,
        )  # fmt: skip
        self.usage_ratio = Gauge(
            "metasched_tenant_usage_share_ratio",
            "The tenant's fraction of all decayed usage over its fraction of all weight (1: at its fair share)",
            ["tenant"], registry=r,
        )  # fmt: skip
        self.cluster_gpus = Gauge(
            "metasched_cluster_gpus", "GPUs on schedulable nodes by type (after capacity Slurm gave to other jobs)",
            ["gpu_type"], registry=r,
        )  # fmt: skip
        self.free_gpus = Gauge(
            "metasched_free_gpus", "Free GPUs on schedulable nodes after this period's placements", ["gpu_type"],
            registry=r,
        )  # fmt: skip
        self.stranded_gpus = Gauge("metasched_stranded_gpus", "Free GPUs no waiting task's shape can use", registry=r)
        self.largest_gang = Gauge(
            "metasched_largest_placeable_gang_gpus", "GPUs of the largest gang that could start now, by type",
            ["gpu_type"], registry=r,
        )  # fmt: skip
        self.slurm_cluster_up = Gauge(
            "metasched_slurm_cluster_up", "1 while the Slurm cluster answers, 0 while it is dark (several clusters)",
            ["cluster"], registry=r,
        )  # fmt: skip
        self.slurm_cluster_dark = Gauge(
            "metasched_slurm_cluster_dark_seconds", "How long the Slurm cluster has not answered (0: it answers)",
            ["cluster"], registry=r,
        )  # fmt: skip
        # per Slurm cluster (several clusters; a single-cluster site exports none): meta/policy/cluster_figures.py
        self.cluster_nodes = Gauge(
            "metasched_cluster_nodes", "Nodes of the Slurm cluster by state as the policy sees them (schedulable, "
            "drained, down; a drained or dark cluster's nodes count as drained)", ["cluster", "state"], registry=r,
        )  # fmt: skip
        self.cluster_total_gpus = Gauge(
            "metasched_cluster_total_gpus", "GPUs on the Slurm cluster's schedulable nodes by type (as metasched_cluster_gpus)",
            ["cluster", "gpu_type"], registry=r,
        )  # fmt: skip
        self.cluster_free_gpus = Gauge(
            "metasched_cluster_free_gpus",
            "Free GPUs on the Slurm cluster's schedulable nodes after this period's placements, by type",
            ["cluster", "gpu_type"], registry=r,
        )  # fmt: skip
        self.cluster_running_attempts = Gauge(
            "metasched_cluster_running_attempts",
            "Live attempts on the Slurm cluster (this period's committed placements included)", ["cluster"], registry=r,
        )  # fmt: skip
        self.cluster_drained = Gauge(
            "metasched_cluster_drained", "1 while an admin has drained the Slurm cluster (metasched cluster drain)",
            ["cluster"], registry=r,
        )  # fmt: skip
        self._cycle_gauges = (
            self.attempts, self.queue_depth, self.pending_tasks, self.oldest_pending, self.overdue, self.allocated,
            self.guaranteed, self.limit, self.borrowed, self.weight, self.usage, self.usage_ratio, self.cluster_gpus,
            self.free_gpus, self.largest_gang, self.slurm_cluster_up, self.slurm_cluster_dark, self.cluster_nodes,
            self.cluster_total_gpus, self.cluster_free_gpus, self.cluster_running_attempts, self.cluster_drained,
        )  # fmt: skip
        # --- Slurm calls (every replica that calls Slurm)
        self.slurm_calls = Counter(
            "metasched_slurm_calls_total", "Slurm command calls by command and outcome", ["command", "outcome"],
            registry=r,
        )  # fmt: skip
        self.slurm_errors = Counter(
            "metasched_slurm_errors_total", "Slurm command calls that failed, by command and outcome",
            ["command", "outcome"], registry=r,
        )  # fmt: skip
        self.slurm_latency = Histogram(
            "metasched_slurm_call_seconds", "Slurm command latency", ["command"], registry=r
        )
        for command in SLURM_COMMANDS:
            for outcome in _ERROR_OUTCOMES:
                self.slurm_errors.labels(command, outcome)
        self.set_leading(None)

    def record(self, call: CallRecord) -> None:
        """record is the Slurm command observer hook (see slurm_bridge.call_records)."""
        self.slurm_calls.labels(call.command, call.outcome.value).inc()
        self.slurm_latency.labels(call.command).observe(call.latency_s)
        if call.outcome != CallOutcome.OK:
            self.slurm_errors.labels(call.command, call.outcome.value).inc()

    def set_leading(self, epoch: int | None) -> None:
        """set_leading marks this replica leader (of ``epoch``) or not; a replica not leading exports no cycle gauges."""
        self.leader.set(1 if epoch is not None else 0)
        self.epoch.set(epoch or 0)
        if epoch is None:
            self._last_reconcile = None
            self.stranded_gpus.set(0)
            self.aging_bound.set(0)
            for gauge in self._cycle_gauges:
                forget_all(gauge)
        elif self._last_reconcile is None:
            self._last_reconcile = time.monotonic()  # a new leader's lag counts from when it took over

    def clusters_seen(self, clusters: Iterable[str], dark: Mapping[str, float]) -> None:
        """clusters_seen sets each Slurm cluster's reachability (a site of several clusters; one exports none)."""
        for cluster in clusters:
            self.slurm_cluster_up.labels(cluster).set(0 if cluster in dark else 1)
            self.slurm_cluster_dark.labels(cluster).set(dark.get(cluster, 0.0))

    def reconciled(self) -> None:
        """reconciled records that the leader has just reconciled with Slurm."""
        self._last_reconcile = time.monotonic()

    def know_tenants(self, tenants: Iterable[str], kinds: Iterable[str]) -> None:
        """know_tenants creates the per-tenant counters and histograms at 0, so rates see their first event."""
        kinds = tuple(kinds)
        for tenant in tenants:
            self.placements.labels(tenant)
            self.preemptions.labels(tenant)
            self.lost_gpu_seconds.labels(tenant)
            for outcome in DEADLINE_OUTCOMES:
                self.deadlines.labels(tenant, outcome)
            for kind in kinds:
                self.queue_delay.labels(kind, tenant)

    def _reconcile_lag(self) -> float:
        """_reconcile_lag is read at scrape time: it grows while a leader's period hangs (0 when not leading)."""
        return 0.0 if self._last_reconcile is None else time.monotonic() - self._last_reconcile

    def serve(self, port: int, address: str = "127.0.0.1") -> None:
        """serve exposes /metrics over HTTP on a background thread."""
        start_http_server(port, addr=address, registry=self.registry)
