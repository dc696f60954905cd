"""The daemon's Prometheus metrics (counters set by the steps, gauges after step 11): queue, placements, attempts, reconcile lag, Slurm calls."""

from __future__ import annotations

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram, start_http_server

from slurm_bridge.observer import CallOutcome, CallRecord

_DELAY_BUCKETS = (1, 5, 15, 30, 60, 120, 300, 600, 1800, 3600, 4 * 3600, 12 * 3600, float("inf"))


class Metrics:
    """Metrics owns one registry so tests and several daemons in a process stay apart."""

    def __init__(self, registry: CollectorRegistry | None = None):
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.queue_depth = Gauge("metasched_queue_depth", "Pending tasks by tenant", ["tenant"], registry=r)
        self.queue_delay = Histogram(
            "metasched_queue_delay_seconds", "Submit-to-placement delay", ["kind"], buckets=_DELAY_BUCKETS, registry=r
        )
        self.placements = Counter("metasched_placements_total", "Attempts created by the scheduler", registry=r)
        self.preemptions = Counter("metasched_preemptions_total", "Attempts preempted by the scheduler", registry=r)
        self.attempts = Gauge("metasched_attempts", "Attempts by state", ["state"], registry=r)
        self.cycle_seconds = Histogram("metasched_cycle_seconds", "Scheduling cycle duration", registry=r)
        self.reconcile_lag = Gauge(
            "metasched_reconcile_lag_seconds", "Seconds since the last successful reconcile", registry=r
        )
        self.reconcile_transitions = Counter(
            "metasched_reconcile_transitions_total", "Attempt transitions driven by Slurm reports", registry=r
        )
        self.orphans = Counter("metasched_orphans_cancelled_total", "Orphan Slurm jobs cancelled", registry=r)
        self.leader = Gauge("metasched_leader", "1 when this replica leads", registry=r)
        self.epoch = Gauge("metasched_leader_epoch", "Leader epoch held by this replica", registry=r)
        self.stranded_gpus = Gauge("metasched_stranded_gpus", "Free GPUs no pending shape can use", registry=r)
        self.slurm_calls = Counter(
            "metasched_slurm_calls_total", "Slurm command calls", ["command", "outcome"], registry=r
        )
        self.slurm_errors = Counter(
            "metasched_slurm_errors_total", "Slurm command calls that failed", ["command", "outcome"], registry=r
        )
        self.slurm_latency = Histogram(
            "metasched_slurm_call_seconds", "Slurm command latency", ["command"], registry=r
        )

    def record(self, call: CallRecord) -> None:
        """record is the Slurm command observer hook (see slurm_bridge.observer)."""
        self.slurm_calls.labels(call.command, call.outcome.value).inc()
        self.slurm_latency.labels(call.command).observe(call.latency_s)
        if call.outcome != CallOutcome.OK:
            self.slurm_errors.labels(call.command, call.outcome.value).inc()

    def serve(self, port: int, address: str = "127.0.0.1") -> None:
        """serve exposes /metrics over HTTP on a background thread."""
        start_http_server(port, addr=address, registry=self.registry)
