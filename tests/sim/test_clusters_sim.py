"""Several Slurm clusters in the simulator (issue 26): split presets, modes, gangs, outages, routers."""

from __future__ import annotations

import dataclasses
from pathlib import Path

import pytest

from meta.model.clusters import cluster_of
from meta.model.kinds import JobKind
from meta.model.resources import ResourceVector
from meta.policy import fifo
from meta.policy.plan import Placement, Plan
from meta.policy.snapshot import NodeShare, PendingTask, Reservation, Snapshot
from meta.sim.cluster import ClusterError, load_cluster
from meta.sim.config import SimConfig
from meta.sim.engine import Engine, SimulationError
from meta.sim.federation import racing
from meta.sim.job import JobState
from meta.sim.multicluster import MODES, cluster_capacity, mode_spec, tenant_demand
from meta.sim.outages import Outage, dark_clusters, parse_outage
from meta.sim.routing import earliest_router, hashed_cluster, pin_tenants, pinned_router
from meta.sim.run import RunSpec, prepare, run
from meta.sim.split import split_clusters
from meta.sim.trace import TraceJob, load_trace
from tests.sim.conftest import write_trace

# exact estimates, decisions at once, every job measured: times below are hand-checkable
EXACT = SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=0.0, idle_cycle_s=0.0)
TWO = "4x8@2"  # 2 clusters × 2 nodes × 8 GPUs


# --- split presets ---------------------------------------------------------------------------------

def test_split_by_node_count_names_every_node_and_switch_by_cluster() -> None:
    spec = load_cluster("philly150@2")
    nodes = list(spec.iter_nodes())
    assert spec.cluster_names() == ["c1", "c2"] and cluster_capacity(spec) == {"c1": 600, "c2": 600}
    assert [sum(cluster_of(n.name) == c for n in nodes) for c in ("c1", "c2")] == [75, 75]
    assert all(n.switch and cluster_of(n.switch) == cluster_of(n.name) for n in nodes)
    tree = spec.switch_tree()
    # each cluster has its own spine: no switch joins the two
    assert {tree[n.switch] for n in nodes} == {"c1/spine", "c2/spine"}
    assert len({n.name for n in nodes}) == 150 and spec.total_gpus() == 1200


def test_split_keeps_group_order_and_cuts_inside_a_group() -> None:
    spec = split_clusters(load_cluster("philly"), 2)
    counts = [(g.cluster, g.name, g.count) for g in spec.node_groups]
    assert counts == [("c1", "p2", 276), ("c2", "p2", 45), ("c2", "p8", 231)]
    assert spec.node_count() == 552 and spec.total_gpus() == 2490


def test_split_of_a_switch_cluster_keeps_whole_switches() -> None:
    full = load_cluster("crux", scale=0.15)
    split = load_cluster("crux@2", scale=0.15)
    assert [g.count for g in split.node_groups] == [g.count for g in full.node_groups]
    by_cluster = cluster_capacity(split)
    assert set(by_cluster) == {"c1", "c2"} and abs(by_cluster["c1"] - by_cluster["c2"]) <= 8 * 8


def test_split_into_three_and_bad_splits() -> None:
    assert [g.count for g in load_cluster("150x8@3").node_groups] == [50, 50, 50]
    with pytest.raises(ClusterError):
        split_clusters(load_cluster("2x8"), 3)
    with pytest.raises(ClusterError):
        split_clusters(load_cluster("4x8@2"), 2)
    with pytest.raises(ValueError):
        split_clusters(load_cluster("4x8"), 2, names=["a/b", "c"])


def test_an_unsplit_preset_keeps_bare_names() -> None:
    spec = load_cluster("philly150")
    assert spec.cluster_names() == [] and all("/" not in n.name for n in spec.iter_nodes())
    assert set(spec.switch_tree().values()) == {"spine"}


def test_a100_h100_preset_is_two_clusters_of_one_gpu_type_each() -> None:
    spec = load_cluster("a100h100")
    assert spec.cluster_names() == ["a100", "h100"]
    types = {cluster_of(n.name): n.capacity.gpu_type for n in spec.iter_nodes()}
    assert types == {"a100": "a100", "h100": "h100"} and spec.total_gpus() == 1200
    assert spec.switch_tree()["h100/h100-sw0"] == "h100/spine"


# --- modes -----------------------------------------------------------------------------------------

def _rows() -> list[tuple]:
    """_rows: tenant x floods with one-node jobs, y and z bring smaller ones and a 2-node gang."""
    rows = [(f"x{i}", 10 * i, 600, 8, "x") for i in range(6)]
    rows += [(f"y{i}", 5 + 40 * i, 300, 4, "y") for i in range(5)]
    rows += [(f"z{i}", 30 + 50 * i, 200, 2, "z") for i in range(4)]
    rows += [("g", 100, 400, 16, "z")]
    return rows


def _mode_run(trace: Path, mode: str, demand: dict[str, float] | None = None):
    """_mode_run simulates one mode on the 2 × 2-node site."""
    base = RunSpec(trace=trace, cluster=TWO, policy="metasched", config=EXACT)
    prepared = prepare(base)
    spec = mode_spec(mode, base, cluster_capacity(prepared[2]), demand or tenant_demand(prepared[0]))
    return run(spec, prepared=prepared)


def test_pinned_confines_each_tenant_to_its_cluster(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", _rows())
    demand = {"x": 100.0, "y": 10.0, "z": 5.0}  # x alone on one cluster, y and z on the other
    pins = pin_tenants(demand, {"c1": 16, "c2": 16})
    assert pins == {"x": "c1", "y": "c2", "z": "c2"}
    pinned = _mode_run(trace, "pinned", demand).raw
    assert all(j.state == JobState.DONE for j in pinned.jobs)
    assert {j.cluster for j in pinned.jobs if j.trace.tenant == "x"} == {"c1"}
    assert {j.cluster for j in pinned.jobs if j.trace.tenant != "x"} == {"c2"}
    # unconfined, the same policy spreads x's flood over both clusters
    free = _mode_run(trace, "metasched").raw
    assert {j.cluster for j in free.jobs if j.trace.tenant == "x"} == {"c1", "c2"}


def test_a_gang_never_runs_split_and_one_too_big_for_any_cluster_is_rejected(tmp_path: Path) -> None:
    rows = [("big", 0, 100, 24, "x"), ("g1", 0, 100, 16, "y"), ("g2", 0, 100, 16, "y"), ("s", 0, 50, 8, "z")]
    trace = write_trace(tmp_path / "t.csv", rows)
    for mode in MODES:
        jobs = {j.trace.job_id: j for j in _mode_run(trace, mode).raw.jobs}
        # 24 GPUs fit the site (32) but neither 16-GPU cluster: rejected at submit, never started
        assert jobs["big"].state == JobState.REJECTED, mode
        assert all(jobs[k].state == JobState.DONE for k in ("g1", "g2", "s")), mode
        # a placement over two clusters would raise (the run is strict); unconfined, the two 2-node gangs
        # take one cluster each; pinned, both go to tenant y's cluster, one after the other
        clusters = {jobs["g1"].cluster, jobs["g2"].cluster}
        assert len(clusters) == (2 if mode != "pinned" else 1), mode


def _span(snapshot: Snapshot, config: object = None) -> Plan:
    """_span is a broken policy: it puts the first task's two workers on the first node of each cluster."""
    task = snapshot.pending[0]
    firsts = [next(n for n in snapshot.nodes if cluster_of(n.name) == c) for c in ("c1", "c2")]
    shares = tuple(NodeShare(n.name, task.per_worker) for n in firsts)
    return Plan(placements=[Placement(task.task_id, task.job_id, shares)])


def test_the_engine_refuses_a_placement_that_spans_clusters(tmp_path: Path) -> None:
    trace, _ = load_trace(write_trace(tmp_path / "t.csv", [("g", 0, 100, 16, "x")]))
    with pytest.raises(SimulationError, match="spans clusters"):
        Engine(trace, load_cluster(TWO), _span, None, EXACT).run()


def test_racing_starts_each_job_once_and_the_first_cluster_wins_a_tie(tmp_path: Path) -> None:
    trace, _ = load_trace(write_trace(tmp_path / "t.csv", [("a", 0, 100, 8, "x"), ("b", 0, 100, 8, "x")]))
    # fifo, raced: c1 decides first and starts both on its two nodes; c2 never sees them
    result = Engine(trace, load_cluster(TWO), racing(fifo.schedule), None, EXACT).run()
    assert [j.cluster for j in result.jobs] == ["c1", "c1"] and all(j.queue_s == 0 for j in result.jobs)


def test_the_modes_run_a_tiny_trace_deterministically(tmp_path: Path) -> None:
    trace = write_trace(tmp_path / "t.csv", _rows())
    means = {}
    for mode in MODES:
        first, second = (_mode_run(trace, mode).report["metrics"] for _ in range(2))
        for figures in (first, second):
            figures.pop("wall_s"), figures.pop("policy_s")
        assert first == second, mode
        assert first["jobs"]["completed_measured"] == len(_rows()) and first["invalid_placements"] == 0
        means[mode] = first["queue"]["mean"]
    assert len(set(means.values())) > 1  # where a job may go changes the outcome


# --- outages ---------------------------------------------------------------------------------------

def _outage_case(tmp_path: Path, outages: tuple[Outage, ...], cluster: str = "2x8@2"):
    """_outage_case: a short and a long job fill both 1-node clusters at 0; j (t=150) needs one of them."""
    rows = [("short", 0, 300, 8, "x"), ("long", 0, 5000, 8, "x"), ("j", 150, 100, 8, "y")]
    trace = write_trace(tmp_path / "t.csv", rows)
    config = dataclasses.replace(EXACT, outages=outages)
    return {j.trace.job_id: j for j in run(RunSpec(trace=trace, cluster=cluster, policy="metasched",
                                                   config=config)).raw.jobs}


def test_an_outage_blocks_new_placements_on_its_cluster_during_its_window_only(tmp_path: Path) -> None:
    calm = _outage_case(tmp_path, ())
    freed = calm["short"].cluster
    assert calm["j"].first_start == 300 and calm["j"].cluster == freed  # starts when short ends
    dark = _outage_case(tmp_path, (Outage(freed, 100, 1000),))
    # short was placed before the outage and runs on through it; j may not start there until the end
    assert dark["short"].end_time == 300 and dark["short"].preemptions == 0
    assert dark["j"].first_start == 1000 and dark["j"].cluster == freed
    assert dark["long"].end_time == 5000


def test_an_outage_before_submit_keeps_jobs_off_the_dark_cluster(tmp_path: Path) -> None:
    jobs = _outage_case(tmp_path, (Outage("c1", 0, 400),))
    assert jobs["short"].cluster == "c2"  # both arrive while c1 is dark: one waits for it or for short
    assert jobs["long"].first_start in (300, 400)
    assert jobs["j"].first_start > 150


def test_outages_are_checked_and_parsed(tmp_path: Path) -> None:
    assert parse_outage("c1@48-60") == Outage("c1", 48 * 3600, 60 * 3600)
    assert dark_clusters([Outage("c1", 10, 20), Outage("c2", 15, 30)], 20) == {"c2"}
    with pytest.raises(ValueError):
        Outage("c1", 20, 10)
    with pytest.raises(ValueError):
        parse_outage("c1 from 3 to 4")
    with pytest.raises(SimulationError, match="unknown cluster"):
        _outage_case(tmp_path, (Outage("c3", 0, 10),))
    with pytest.raises(SimulationError, match="unknown cluster"):
        _outage_case(tmp_path, (Outage("c1", 0, 10),), cluster="2x8")


# --- routers ---------------------------------------------------------------------------------------

def _task(task_id: str, gpus: int = 8, clusters: frozenset[str] = frozenset()) -> PendingTask:
    """_task is a one-worker pending task."""
    return PendingTask(task_id=task_id, job_id=task_id, tenant="t", kind=JobKind.TRAINING, priority_class="",
                       submit_time=0.0,
                       per_worker=ResourceVector(gpus=gpus), runtime_estimate_s=100.0, clusters=clusters)


def _busy(node: str, end: float, gpus: int = 8) -> Reservation:
    """_busy is running work on ``node`` until ``end``."""
    return Reservation(attempt_id=f"r-{node}", task_id=f"r-{node}", job_id=f"r-{node}", tenant="t",
                       priority_class="", shares=(NodeShare(node, ResourceVector(gpus=gpus)),),
                       start_time=0.0, expected_end=end)


def test_earliest_goes_where_running_work_ends_first_and_never_to_a_full_cluster_that_ends_later() -> None:
    nodes = tuple(load_cluster("2x8@2").iter_nodes())  # c1/n-0000, c2/n-0000
    route = earliest_router()
    both = Snapshot(now=0.0, nodes=nodes, reservations=(_busy("c1/n-0000", 900), _busy("c2/n-0000", 300)))
    assert route(_task("a"), both) == {"c2"}
    one = Snapshot(now=0.0, nodes=nodes, reservations=(_busy("c2/n-0000", 300),))
    assert route(_task("a"), one) == {"c1"}
    # fits now on both: the one with more free GPUs net of jobs already waiting for it
    half = Snapshot(now=0.0, nodes=nodes, reservations=(_busy("c1/n-0000", 50, gpus=4),),
                    pending=(_task("w", 2, frozenset({"c2"})), _task("v", 2, frozenset({"c2"}))))
    assert route(_task("a", 4), half) == {"c1"}
    assert route(_task("a", 4), dataclasses.replace(half, pending=half.pending[:1])) == {"c2"}
    # a dark cluster does not answer
    dark = dataclasses.replace(one, nodes=(dataclasses.replace(nodes[0], healthy=False), nodes[1]))
    assert route(_task("a"), dark) == {"c2"}
    # one cluster: nothing to choose
    assert route(_task("a"), Snapshot(now=0.0, nodes=tuple(load_cluster("2x8").iter_nodes()))) == frozenset()


def test_pinning_balances_demand_per_gpu_and_spreads_the_catch_all_tenant() -> None:
    assert pin_tenants({"a": 10, "b": 6, "c": 5, "d": 1}, {"c1": 1, "c2": 1}) == {
        "a": "c1", "b": "c2", "c": "c2", "d": "c1"}
    # a cluster twice as large takes twice the demand before the other gets any more
    assert pin_tenants({"a": 4, "b": 3, "c": 2}, {"c1": 2, "c2": 1}) == {"a": "c1", "b": "c2", "c": "c1"}
    capacity = {"c1": 1.0, "c2": 1.0}
    route = pinned_router({"a": "c2"}, capacity)
    snapshot = Snapshot(now=0.0, nodes=())
    unknown = [dataclasses.replace(_task(f"j{i}"), tenant="unknown") for i in range(200)]
    spread = [next(iter(route(t, snapshot))) for t in unknown]
    assert 60 < spread.count("c1") < 140  # per job, roughly half each
    assert route(dataclasses.replace(_task("x"), tenant="a"), snapshot) == {"c2"}
    assert route(dataclasses.replace(_task("x"), tenant="new"), snapshot) == {hashed_cluster("new", capacity)}


def test_demand_counts_gpu_hours_and_leaves_out_the_catch_all() -> None:
    jobs = [TraceJob("1", 0, 3600, 8, tenant="a"), TraceJob("2", 0, 1800, 2, tenant="a"),
            TraceJob("3", 0, 3600, 8, tenant="unknown")]
    assert tenant_demand(jobs) == {"a": 9.0}


def test_running_work_on_a_dark_cluster_is_never_preempted(tmp_path: Path) -> None:
    # two 1-node clusters, x and y guaranteed 8 GPUs each: x borrows both nodes, y comes to reclaim one
    site = tmp_path / "site.yaml"
    site.write_text("name: two\nnode_groups:\n"
                    "- {name: n, cluster: c1, count: 1, gpus: 8}\n- {name: n, cluster: c2, count: 1, gpus: 8}\n"
                    "tenants: {x: 1, y: 1}\n")
    rows = [("x1", 0, 5000, 8, "x"), ("x2", 0, 5000, 8, "x"), ("y1", 100, 100, 8, "y")]
    trace = write_trace(tmp_path / "t.csv", rows)

    def jobs(outages: tuple[Outage, ...]) -> dict[str, object]:
        config = dataclasses.replace(EXACT, outages=outages)
        raw = run(RunSpec(trace=trace, cluster=str(site), policy="metasched", config=config)).raw
        return {j.trace.job_id: j for j in raw.jobs}

    calm = jobs(())
    assert sum(calm[k].preemptions for k in ("x1", "x2")) == 1 and calm["y1"].first_start == 100  # y reclaims
    for victim in ("x1", "x2"):  # whichever x job ran on it, a dark cluster's attempt runs on untouched
        dark_cluster = calm[victim].cluster if calm[victim].preemptions else None
        if dark_cluster is None:
            continue
        dark = jobs((Outage(dark_cluster, 50, 10_000),))
        assert dark[victim].preemptions == 0 and dark[victim].end_time == 5000
        other = "x2" if victim == "x1" else "x1"
        assert dark[other].preemptions == 1 and dark["y1"].cluster != dark_cluster
