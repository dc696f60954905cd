"""``meta.plan.calibrate`` and ``meta.plan.site``: history replayed where the outcome is known; the limit estimate."""

from __future__ import annotations

import io
from dataclasses import replace
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest

from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.plan.calibrate import Calibration, Pair, TenantFit, calibrate, trace_job
from meta.plan.history import HistoryExport, HistoryRow
from meta.plan.site import TenantQuota, binding_quotas, site_cluster
from meta.plan.trace_csv import write_trace
from meta.policy import fifo
from meta.sim.cluster import ClusterSpec, NodeGroup
from meta.sim.config import SimConfig, runtime_estimate
from meta.sim.engine import Engine
from meta.sim.trace import TraceError, TraceJob, load_trace

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
ONE_NODE = ClusterSpec(name="one", node_groups=[NodeGroup(name="n", count=1, gpus=8, gpu_type="a100")])
WEIGHTS = {"acme": 1.0, "beta": 1.0}


def row(job_id: str, submit: float, duration: float, queue: float, tenant: str = "acme", gpus: int = 8,
        **changes: object) -> HistoryRow:
    """row is one single-worker task of ``gpus`` GPUs (any type) with a recorded queue delay."""
    base = HistoryRow(
        job_id=job_id, submit_time=submit, duration_s=duration, num_gpus=gpus, gpu_type=None, num_cpus=1.0,
        memory_mib=0, tenant=tenant, job_kind="training", workers=1, gpus_per_worker=gpus, attempts=1,
        outcome="succeeded", censored=False, queue_delay_s=queue, time_limit_s=duration + 60, user="u", name=job_id,
    )
    return replace(base, **changes)


def export(*rows: HistoryRow) -> HistoryExport:
    """export is a window holding ``rows`` (sorted as history_rows sorts them)."""
    ordered = sorted(rows, key=lambda r: (r.submit_time, r.job_id))
    found = HistoryExport(T0, T0 + timedelta(days=1), T0 + timedelta(days=1), rows=ordered)
    found.jobs = len(rows)
    return found


def test_two_node_sized_jobs_together_the_second_waits_the_first_s_run() -> None:
    # one 8-GPU node; both ask 8 GPUs at 1000 s: the simulator runs one at once, the other at its end (600 s later)
    history = export(row("a", 1000, 600, queue=0), row("b", 1000, 600, queue=700))
    result = calibrate(history, ONE_NODE, WEIGHTS, None, 2.0, min_jobs=2)
    (acme,) = result.tenants
    assert (acme.tenant, acme.jobs, result.rows, result.replayed, result.unplaced) == ("acme", 2, 2, 2, 0)
    assert acme.mean.real == 350 and acme.mean.sim == pytest.approx(300, abs=2)
    assert acme.mean.error == pytest.approx((300 - 350) / 350, abs=0.01)
    assert acme.p95.real == pytest.approx(665) and acme.p95.sim == pytest.approx(570, abs=2)  # linear interpolation
    assert result.mean == acme.mean
    # the same GPU-seconds over each side's span: recorded 0 → 1300 s (b ran 700 → 1300), simulated 0 → 1200 s
    assert result.span_s.real == 1300 and result.span_s.sim == pytest.approx(1200, abs=2)
    assert result.utilization.real == pytest.approx(9600 / (8 * 1300))
    assert result.utilization.sim == pytest.approx(1.0, abs=0.01)
    assert result.verdict() == "simulated mean queue delay within 15% of recorded on every tenant (worst: acme, -14.3%)"


def test_a_small_tenant_is_replayed_but_not_compared() -> None:
    history = export(row("a", 0, 600, queue=0), row("b", 0, 600, queue=600), row("c", 0, 600, queue=1200, tenant="beta"))
    result = calibrate(history, ONE_NODE, WEIGHTS, None, 2.0, min_jobs=2)
    assert [fit.tenant for fit in result.tenants] == ["acme"] and result.small_tenants == {"beta": 1}
    # beta's job held the node for 600 s of someone's wait: 0 + 600 + 1200 over three
    assert result.mean.real == 600 and result.mean.sim == pytest.approx(600, abs=2)
    assert "replayed but not compared (fewer than 2 rows): beta (1)" in result.notes
    assert result.as_dict()["small_tenants"] == {"beta": 1}


def test_censored_and_unplaceable_rows_are_counted_and_said() -> None:
    running = row("run", 0, 300, queue=5, censored=True, outcome="running")
    retried = row("retry", 10, 100, queue=0, attempts=2)
    huge = row("huge", 20, 100, queue=0, gpus=16)  # one worker of 16 GPUs: no 8-GPU node hosts it
    result = calibrate(export(running, retried, huge), ONE_NODE, WEIGHTS, None, 2.0, min_jobs=1)
    assert (result.rows, result.replayed, result.censored, result.unplaced) == (3, 2, 1, 1)
    assert result.tenants[0].jobs == 2
    text = "\n".join(result.notes)
    assert "1 rows had not ended at the cut" in text and "1 rows never ran in the simulation" in text
    assert "1 rows were retried, requeued or preempted for real" in text
    data = result.as_dict()
    assert (data["rows"], data["replayed"], data["censored"], data["unplaced"]) == (3, 2, 1, 1)


def test_no_recorded_delay_has_no_relative_error() -> None:
    result = calibrate(export(row("a", 0, 600, queue=0)), ONE_NODE, WEIGHTS, None, 2.0, min_jobs=1)
    assert result.tenants[0].mean.real == 0 and result.tenants[0].mean.error is None
    assert result.verdict() == ("no tenant recorded a queue delay: no relative error; "
                                "no relative error for acme (no recorded delay)")
    assert result.as_dict()["tenants"][0]["mean_queue_s"]["error"] is None


def test_verdict_names_the_worst_tenant_and_skips_the_silent_ones() -> None:
    fits = [TenantFit("a", 9, Pair(100, 110), Pair(1, 1)), TenantFit("b", 9, Pair(100, 70), Pair(1, 1)),
            TenantFit("c", 9, Pair(0, 3), Pair(0, 3))]
    result = Calibration(rows=27, replayed=27, censored=0, unplaced=0, min_jobs=5, tenants=fits, small_tenants={},
                         mean=Pair(1, 1), p95=Pair(1, 1), utilization=Pair(1, 1), span_s=Pair(1, 1), capacity_gpus=8)
    assert result.verdict() == ("simulated mean queue delay within 30% of recorded on every tenant with a recorded delay "
                                "(worst: b, -30.0%); no relative error for c (no recorded delay)")
    assert replace(result, tenants=[]).verdict() == "no tenant has 5 replayed jobs: no per-tenant verdict"


def test_an_empty_export_is_refused() -> None:
    with pytest.raises(ValueError, match="no row to replay"):
        calibrate(export(), ONE_NODE, WEIGHTS, None, 2.0)


def test_trace_rows_keep_the_recorded_shape_and_limit() -> None:
    job = trace_job(row("g", 130, 50, queue=0, gpus=8, workers=2, gpus_per_worker=4, gpu_type="h100"), origin=100)
    assert (job.submit_time, job.workers, job.gpus_per_worker, job.gpu_type, job.time_limit_s) == (30, 2, 4, "h100", 110)


# --- the simulator's "limit" estimate and the trace's time_limit_s column ------------------------------------------


def test_limit_estimate_is_the_time_limit_and_never_below_the_run() -> None:
    limit = SimConfig(estimate="limit")
    assert runtime_estimate(100, limit, 900) == 900
    assert runtime_estimate(1000, limit, 900) == 1000  # attempts together ran past one attempt's limit
    assert runtime_estimate(100, limit, None) == 1800  # no limit: the bucket rule
    assert runtime_estimate(100, SimConfig(), 900) == 1800  # the other rules ignore the limit
    assert runtime_estimate(100, SimConfig(estimate="noise"), 900) == 200


def test_the_engine_gives_the_policy_the_limit() -> None:
    trace = [TraceJob("a", 0, 100, 1, time_limit_s=900), TraceJob("b", 0, 100, 1)]
    engine = Engine(trace, ONE_NODE, fifo.schedule, None, SimConfig(estimate="limit", warmup_hours=0))
    assert [job.estimate_s for job in engine.jobs] == [900, 1800]
    assert engine._first_task(0, engine.jobs[0]).runtime_estimate_s == 900


def test_history_csv_carries_the_limit_to_the_loader(tmp_path: Path) -> None:
    path = tmp_path / "trace.csv"
    handle = io.StringIO()
    write_trace([row("a", 0, 100, queue=0, time_limit_s=7200)], handle)
    path.write_text(handle.getvalue())
    (job,), _ = load_trace(path)
    assert job.time_limit_s == 7200


@pytest.mark.parametrize(("cell", "expected"), [("", None), ("3600", 3600.0), ("90.5", 90.5)])
def test_time_limit_column_is_optional(tmp_path: Path, cell: str, expected: float | None) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(f"submit_time,duration_s,num_gpus,time_limit_s\n0,10,1,{cell}\n")
    (job,), _ = load_trace(path)
    assert job.time_limit_s == expected
    path.write_text("submit_time,duration_s,num_gpus\n0,10,1\n")  # a trace without the column, as before
    (job,), _ = load_trace(path)
    assert job.time_limit_s is None


@pytest.mark.parametrize("cell", ["0", "-5", "nan"])
def test_a_time_limit_must_be_positive(tmp_path: Path, cell: str) -> None:
    path = tmp_path / "trace.csv"
    path.write_text(f"submit_time,duration_s,num_gpus,time_limit_s\n0,10,1,{cell}\n")
    with pytest.raises(TraceError, match="time_limit_s must be positive"):
        load_trace(path)


# --- the site: inventory → cluster, quotas the simulator does not apply ---------------------------------------------


def node(name: str, gpus: int, gpu_type: str, switch: str, partitions: tuple[str, ...] = ("gpu",)) -> NodeState:
    """node is one inventory node of 32 cpus and 250 GiB."""
    capacity = ResourceVector(cpus=32, memory_mib=256000, gpus=gpus, gpu_type=gpu_type)
    return NodeState(name=name, capacity=capacity, partitions=partitions, switch=switch)


def test_identical_nodes_become_one_group_per_switch() -> None:
    nodes = [node("a1", 8, "a100", "leaf1"), node("a2", 8, "a100", "leaf1"), node("h1", 8, "h100", "leaf2"),
             node("t1", 4, "t4", "leaf1"), node("t2", 4, "t4", "leaf2")]
    spec = site_cluster(nodes, {"leaf1": "spine", "leaf2": "spine"})
    shapes = sorted((g.gpu_type, g.gpus, g.count, g.switch) for g in spec.node_groups)
    assert shapes == [("a100", 8, 2, "leaf1"), ("h100", 8, 1, "leaf2"), ("t4", 4, 1, "leaf1"), ("t4", 4, 1, "leaf2")]
    assert (spec.node_count(), spec.total_gpus(), spec.gpus_by_type()["t4"]) == (5, 32, 8)
    assert spec.switch_tree() == {"leaf1": "spine", "leaf2": "spine"}
    assert {n.capacity.memory_mib for n in spec.iter_nodes()} == {256000}


def test_only_quotas_that_bind_are_named() -> None:
    spec = site_cluster([node("a1", 8, "a100", "s"), node("a2", 8, "a100", "s"), node("t1", 4, "t4", "s")], {})
    tenants = {
        "a": TenantQuota(70, limits={"a100": 16, "*": 20}),  # the whole a100 pool and every GPU: no effect
        "b": TenantQuota(30, guaranteed={"a100": 4}, limits={"t4": 2, "*": 10}),
    }
    assert binding_quotas(tenants, spec) == ["b guaranteed a100:4", "b limit *:10", "b limit t4:2"]
