"""The daemon's metric families: the full list with help texts, 0 when empty, values after periods on FakeSlurm."""

from __future__ import annotations

import time
from datetime import timedelta
from pathlib import Path

from prometheus_client import CollectorRegistry, Gauge

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.metrics import Metrics, set_all
from meta.cycle.period_metrics import quota_values, share_values
from meta.cycle.reconcile import ReconcileSettings
from meta.model.durations import utcnow
from meta.model.states import JobState
from meta.policy.plan import ReasonCode
from meta.policy.snapshot import Snapshot, TenantState
from meta.service.api import Service
from meta.service.http_metrics import ApiMetrics
from meta.store.models import Tenant
from slurm_bridge.fake import FakeSlurm, small_cluster
from tests.runtime.support import checkpointing, inference, settled, training

# Every family `metasched serve` exports (daemon and API on one registry), with its help text.
# A new family must be added here (and to docs/operations.md, "Metrics, dashboard and alerts"); the dashboard and alert rules are
# checked against a real Prometheus in tests/ops/test_prometheus.py.
FAMILIES = {
    "metasched_leader": "1 when this replica leads the cycle, else 0",
    "metasched_leader_epoch": "Leader epoch held by this replica (0: not leading)",
    "metasched_cycle_seconds": "Snapshot plus policy time of one leader period",
    "metasched_queue_delay_seconds": "Submit-to-placement delay of placed tasks, by job kind and tenant",
    "metasched_placements_total": "Attempts created by the scheduler",
    "metasched_preemptions_total": "Attempts preempted by the scheduler, by the victim's tenant",
    "metasched_preemption_lost_gpu_seconds_total":
        "GPU-seconds preemptions cost: work since the victim's last checkpoint plus its restore time, by tenant",
    "metasched_deadline_jobs_total":
        "Jobs with a deadline that finished successfully, by tenant and outcome (met: by the deadline)",
    "metasched_reconcile_transitions_total": "Attempt transitions driven by Slurm reports",
    "metasched_orphans_cancelled_total": "Orphan Slurm jobs cancelled",
    "metasched_reconcile_lag_seconds": "Seconds since the leader last reconciled with Slurm",
    "metasched_attempts": "Attempts by state",
    "metasched_queue_depth": "Pending tasks by tenant",
    "metasched_pending_tasks": "Tasks the policy left waiting this period, by tenant and typed reason",
    "metasched_oldest_pending_seconds": "Wait since submit of the tenant's oldest waiting task (0: none)",
    "metasched_aging_bound_seconds": "The policy's aging bound (max_wait_s): past it a task outranks share order",
    "metasched_deadline_overdue_tasks": "Waiting or running tasks whose job's deadline has passed",
    "metasched_tenant_allocated_gpus": 'GPUs held by the tenant\'s live attempts (gpu_type "*": all types)',
    "metasched_tenant_guaranteed_gpus": 'The tenant\'s guaranteed GPUs per type ("*": any type)',
    "metasched_tenant_limit_gpus": 'The tenant\'s GPU limit per type ("*": all types; absent: unlimited)',
    "metasched_tenant_borrowed_gpus": "GPUs the tenant holds beyond its guarantee (lent capacity)",
    "metasched_tenant_weight": "The tenant's fair-share weight",
    "metasched_tenant_decayed_usage_gpu_seconds": "The tenant's decayed, cost-weighted GPU-seconds",
    "metasched_tenant_usage_share_ratio":
        "The tenant's fraction of all decayed usage over its fraction of all weight (1: at its fair share)",
    "metasched_cluster_gpus": "GPUs on schedulable nodes by type (after capacity Slurm gave to other jobs)",
    "metasched_free_gpus": "Free GPUs on schedulable nodes after this period's placements",
    "metasched_stranded_gpus": "Free GPUs no waiting task's shape can use",
    "metasched_largest_placeable_gang_gpus": "GPUs of the largest gang that could start now, by type",
    "metasched_slurm_cluster_up": "1 while the Slurm cluster answers, 0 while it is dark (several clusters)",
    "metasched_slurm_cluster_dark_seconds": "How long the Slurm cluster has not answered (0: it answers)",
    "metasched_cluster_nodes": "Nodes of the Slurm cluster by state as the policy sees them (schedulable, drained, "
    "down; a drained or dark cluster's nodes count as drained)",
    "metasched_cluster_total_gpus": "GPUs on the Slurm cluster's schedulable nodes by type (as metasched_cluster_gpus)",
    "metasched_cluster_free_gpus":
        "Free GPUs on the Slurm cluster's schedulable nodes after this period's placements, by type",
    "metasched_cluster_running_attempts": "Live attempts on the Slurm cluster (this period's committed placements "
    "included)",
    "metasched_cluster_drained": "1 while an admin has drained the Slurm cluster (metasched cluster drain)",
    "metasched_slurm_calls_total": "Slurm command calls by command and outcome",
    "metasched_slurm_errors_total": "Slurm command calls that failed, by command and outcome",
    "metasched_slurm_call_seconds": "Slurm command latency",
    "metasched_api_requests_total": "API requests by method, route template and status class",
    "metasched_api_request_seconds": "API request latency by method and route template",
    "metasched_api_auth_failures_total": "API requests refused for their credential, by reason",
    "metasched_api_auth_failure_peers": "Peers (Unix users or addresses) with a refused credential in the "
    "current audit window (each peer's count is in the audit's summary rows)",
    "metasched_submit_refusals_total": "Submits refused by a tenant's submit limits, by tenant and reason "
    "(rate, tenant_pending, user_pending)",
}
# label names stay bounded: tenants are Slurm accounts, the rest are fixed vocabularies
BOUNDED_LABELS = {"tenant", "gpu_type", "state", "reason", "kind", "outcome", "command", "method", "route", "status", "le",
                  "cluster"}  # fmt: skip


def _registry() -> tuple[CollectorRegistry, Metrics]:
    metrics = Metrics()
    ApiMetrics(metrics.registry)  # as `metasched serve` wires them: one registry
    return metrics.registry, metrics


def _exported(registry: CollectorRegistry) -> dict[str, str]:
    return {m.name + ("_total" if m.type == "counter" else ""): m.documentation for m in registry.collect()}


def test_every_family_is_listed_with_its_help_text() -> None:
    registry, _ = _registry()
    assert _exported(registry) == FAMILIES


def test_names_follow_prometheus_conventions() -> None:
    registry, metrics = _registry()
    metrics.know_tenants(["acme"], ["training"])
    for family in registry.collect():
        assert family.name.startswith("metasched_")
        assert (family.type == "counter") == (family.name + "_total" in FAMILIES), family.name
        for sample in family.samples:
            assert set(sample.labels) <= BOUNDED_LABELS, (sample.name, sample.labels)


def _value(metrics: Metrics, name: str, **labels: str) -> float | None:
    return metrics.registry.get_sample_value(name, labels)


def _series(metrics: Metrics, name: str) -> dict[tuple[tuple[str, str], ...], float]:
    return {
        tuple(sorted(s.labels.items())): s.value for m in metrics.registry.collect() for s in m.samples if s.name == name
    }


def _daemon(service: Service, fake: FakeSlurm, tmp_path: Path, holder: str = "metrics-daemon") -> Daemon:
    config = DaemonConfig(
        period_s=0.0,
        leader_lease_s=60.0,
        holder=holder,
        submit_timeout_s=0.0,
        launch=LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=30),
        reconcile=ReconcileSettings(unknown_window_s=0.0, lost_grace_s=600.0),
    )
    return Daemon(service.db, fake, config, Metrics())


def _run_until_done(service: Service, daemon: Daemon, fake: FakeSlurm, jobs: list[str]) -> None:
    for _ in range(60):
        assert settled(daemon).error == ""
        fake.advance()
        if all(service.status(j).state in {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED} for j in jobs):
            assert settled(daemon).error == ""  # one more period sees the queue empty
            return
    raise AssertionError("jobs did not finish")


EIGHT = {"cpus": 8, "memory": "32G", "gpus": 8, "gpu_type": "a100"}


def test_values_after_a_period_and_zero_once_the_queue_empties(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()  # 4 nodes x 8 A100
    jobs = [service.submit(training(f"a{i}", tenant="acme", resources=EIGHT)).job.id for i in range(3)]
    jobs += [service.submit(training(f"b{i}", tenant="beta", resources=EIGHT)).job.id for i in range(2)]
    with service.db.session() as session:
        session.get(Tenant, "acme").guaranteed = {"a100": 8}
        session.get(Tenant, "acme").limits = {"a100": 24}
    daemon = _daemon(service, fake, tmp_path)
    metrics = daemon.metrics
    assert settled(daemon).error == ""
    assert _value(metrics, "metasched_leader") == 1
    assert _value(metrics, "metasched_cluster_gpus", gpu_type="a100") == 32
    assert _value(metrics, "metasched_free_gpus", gpu_type="a100") == 0
    held = {t: _value(metrics, "metasched_tenant_allocated_gpus", tenant=t, gpu_type="a100") for t in ("acme", "beta")}
    assert sum(held.values()) == 32  # four of the five 8-GPU jobs run, one waits
    assert _value(metrics, "metasched_tenant_allocated_gpus", tenant="acme", gpu_type="*") == held["acme"]
    assert _value(metrics, "metasched_tenant_guaranteed_gpus", tenant="acme", gpu_type="a100") == 8
    assert _value(metrics, "metasched_tenant_guaranteed_gpus", tenant="beta", gpu_type="a100") == 0
    assert _value(metrics, "metasched_tenant_limit_gpus", tenant="acme", gpu_type="a100") == 24
    assert _value(metrics, "metasched_tenant_limit_gpus", tenant="beta", gpu_type="a100") is None  # unlimited
    assert _value(metrics, "metasched_tenant_borrowed_gpus", tenant="acme", gpu_type="a100") == held["acme"] - 8
    assert _value(metrics, "metasched_tenant_borrowed_gpus", tenant="beta", gpu_type="a100") == held["beta"]
    waiting = "acme" if held["acme"] < 24 else "beta"
    other = "beta" if waiting == "acme" else "acme"
    assert _value(metrics, "metasched_queue_depth", tenant=waiting) == 1
    assert _value(metrics, "metasched_queue_depth", tenant=other) == 0
    reasons = _series(metrics, "metasched_pending_tasks")
    assert len(reasons) == 2 * len(ReasonCode)  # every tenant x every typed reason, 0 when none
    assert sum(v for k, v in reasons.items() if ("tenant", waiting) in k) == 1
    assert sum(v for k, v in reasons.items() if ("tenant", other) in k) == 0
    assert _value(metrics, "metasched_oldest_pending_seconds", tenant=waiting) > 0
    assert _value(metrics, "metasched_oldest_pending_seconds", tenant=other) == 0
    placed = sum(_value(metrics, "metasched_placements_total", tenant=t) for t in ("acme", "beta"))
    delays = sum(_value(metrics, "metasched_queue_delay_seconds_count", kind="training", tenant=t) for t in ("acme", "beta"))
    assert placed == delays == 4
    assert _value(metrics, "metasched_queue_delay_seconds_count", kind="inference", tenant="acme") == 0  # pre-made
    assert _value(metrics, "metasched_tenant_weight", tenant="acme") == 1.0
    assert 0 <= _value(metrics, "metasched_reconcile_lag_seconds") < 5
    assert _value(metrics, "metasched_aging_bound_seconds") == daemon.config.scheduler.max_wait_s

    _run_until_done(service, daemon, fake, jobs)
    for tenant in ("acme", "beta"):  # the bug of issue 16: the last value stayed after the queue emptied
        assert _value(metrics, "metasched_queue_depth", tenant=tenant) == 0
        assert _value(metrics, "metasched_tenant_allocated_gpus", tenant=tenant, gpu_type="a100") == 0
        assert _value(metrics, "metasched_oldest_pending_seconds", tenant=tenant) == 0
    assert set(_series(metrics, "metasched_pending_tasks").values()) == {0}
    assert _value(metrics, "metasched_attempts", state="succeeded") == 5
    assert _value(metrics, "metasched_attempts", state="running") == 0
    assert _value(metrics, "metasched_free_gpus", gpu_type="a100") == 32
    assert _value(metrics, "metasched_largest_placeable_gang_gpus", gpu_type="a100") == 32
    assert _value(metrics, "metasched_tenant_decayed_usage_gpu_seconds", tenant="acme") > 0


def test_a_standby_exports_no_cycle_gauges(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    service.submit(training("t", tenant="acme"))
    leader = _daemon(service, fake, tmp_path, holder="leader")
    standby = _daemon(service, fake, tmp_path, holder="standby")
    assert settled(leader).error == ""
    assert settled(standby).error == ""
    assert _value(standby.metrics, "metasched_leader") == 0
    assert _series(standby.metrics, "metasched_queue_depth") == {}
    assert _series(standby.metrics, "metasched_tenant_allocated_gpus") == {}
    assert _value(standby.metrics, "metasched_reconcile_lag_seconds") == 0
    assert _value(leader.metrics, "metasched_queue_depth", tenant="acme") == 0
    leader.metrics.set_leading(None)  # what losing leadership does: the leader's picture goes too
    assert _series(leader.metrics, "metasched_queue_depth") == {}


def test_deadline_outcomes_are_counted_when_the_job_finishes_and_overdue_tasks_meanwhile(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    ahead = utcnow() + timedelta(hours=2)
    met = service.submit(inference(str(tmp_path / "out"), tenant="acme", partitions=2, deadline=ahead.isoformat())).job.id
    daemon = _daemon(service, fake, tmp_path)
    _run_until_done(service, daemon, fake, [met])
    assert _value(daemon.metrics, "metasched_deadline_jobs_total", tenant="acme", outcome="met") == 1
    assert _value(daemon.metrics, "metasched_deadline_jobs_total", tenant="acme", outcome="missed") == 0
    assert _value(daemon.metrics, "metasched_deadline_overdue_tasks", tenant="acme") == 0

    soon = utcnow() + timedelta(seconds=1)
    late = service.submit(inference(str(tmp_path / "late"), tenant="acme", partitions=2, deadline=soon.isoformat())).job.id
    time.sleep(1.2)  # past the deadline before it even starts
    assert settled(daemon).error == ""
    assert _value(daemon.metrics, "metasched_deadline_overdue_tasks", tenant="acme") == 2  # both partitions
    _run_until_done(service, daemon, fake, [late])
    assert _value(daemon.metrics, "metasched_deadline_jobs_total", tenant="acme", outcome="missed") == 1
    assert _value(daemon.metrics, "metasched_deadline_jobs_total", tenant="acme", outcome="met") == 1
    assert _value(daemon.metrics, "metasched_deadline_overdue_tasks", tenant="acme") == 0


def test_set_all_removes_keys_no_longer_known() -> None:
    gauge = Gauge("g", "a gauge", ["tenant"], registry=CollectorRegistry())
    set_all(gauge, {("a",): 1, ("b",): 2})
    set_all(gauge, {("a",): 0})
    assert {s.labels["tenant"]: s.value for m in gauge.collect() for s in m.samples} == {"a": 0}


def test_borrowing_follows_the_quota_ledger() -> None:
    snapshot = Snapshot(
        now=0.0,
        nodes=(),
        tenants=(
            TenantState("typed", guaranteed={"a100": 4}),
            TenantState("any", guaranteed={"*": 6}),
            TenantState("none"),
        ),
    )
    held = {"typed": {"a100": 6, "h100": 2}, "any": {"a100": 4, "h100": 4}, "none": {"h100": 3}}
    allocated, guaranteed, _, borrowed = quota_values(snapshot, held, ["typed", "any", "none"], ["a100", "h100"])
    assert allocated[("any", "*")] == 8 and guaranteed[("any", "*")] == 6
    assert borrowed[("typed", "a100")] == 2  # beyond its own a100 guarantee
    assert borrowed[("typed", "h100")] == 2  # no h100 or "*" guarantee: all of it is lent capacity
    assert borrowed[("any", "*")] == 2 and borrowed[("any", "a100")] == 2 and borrowed[("any", "h100")] == 2
    assert borrowed[("none", "h100")] == 3 and borrowed[("none", "a100")] == 0


def test_usage_ratio_is_usage_fraction_over_weight_fraction() -> None:
    snapshot = Snapshot(
        now=0.0, nodes=(), tenants=(TenantState("a", weight=3, decayed_usage=300), TenantState("b", weight=1, decayed_usage=300))
    )
    weight, usage, ratio = share_values(snapshot, ["a", "b", "c"])
    assert weight[("a",)] == 3 and usage[("b",)] == 300
    assert ratio[("a",)] == (0.5 / 0.6) and ratio[("b",)] == (0.5 / 0.2) and ratio[("c",)] == 0


def test_a_preemption_counts_its_victim_tenant_and_lost_gpu_seconds(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm(small_cluster(2))
    fake.run_ticks = 1000  # the victims never end on their own
    node = {"cpus": 8, "memory": "32G", "gpus": 8, "gpu_type": "a100"}
    for i in range(2):
        service.submit(checkpointing(f"low{i}", tenant="beta", ckpt_dir=str(tmp_path / f"c{i}"), resources=node,
                                     priority_class="evaluation"))  # fmt: skip
    daemon = _daemon(service, fake, tmp_path)
    for _ in range(3):
        assert settled(daemon).error == ""
        fake.advance()
    assert _value(daemon.metrics, "metasched_preemptions_total", tenant="beta") == 0
    service.submit(training("high", tenant="acme", resources=node))
    assert settled(daemon).error == ""
    assert _value(daemon.metrics, "metasched_preemptions_total", tenant="beta") == 1
    assert _value(daemon.metrics, "metasched_preemptions_total", tenant="acme") == 0
    lost = _value(daemon.metrics, "metasched_preemption_lost_gpu_seconds_total", tenant="beta")
    assert lost > 0  # 8 GPUs since the victim started (no checkpoint yet), plus its restore cost
    assert _value(daemon.metrics, "metasched_pending_tasks", tenant="acme", reason=ReasonCode.PREEMPTING.value) == 1
