"""Waiting causes (issue 23): shortage, fragmentation or policy, on hand-built clusters where the answer is known."""

from __future__ import annotations

from dataclasses import replace

import pytest

from meta.model.kinds import JobKind, Topology
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.policy import fifo
from meta.policy.scheduler import schedule
from meta.policy.snapshot import NodeShare, PendingTask, Reservation, Snapshot, TenantState
from meta.sim import policies
from meta.sim.cluster import ClusterSpec, NodeGroup, load_cluster
from meta.sim.config import SimConfig
from meta.sim.engine import Engine, EngineResult
from meta.sim.trace import TraceJob
from meta.sim.waiting_causes import CAUSES, FRAGMENTATION, POLICY, SHORTAGE, classify, waiting_split
from tests.sim.contended import random_trace, switched_config, weighted_cluster

MEM = 512 * 1024
EXACT = SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=0.0, idle_cycle_s=0.0,
                  waiting_causes=True)


def node(name: str, gpus: int, gpu_type: str | None = None, switch: str | None = None) -> NodeState:
    """node is one node of ``gpus`` GPUs, 64 cpus and 512 GiB."""
    return NodeState(name, ResourceVector(cpus=64, memory_mib=MEM, gpus=gpus, gpu_type=gpu_type), switch=switch)


def task(task_id: str, gpus: int, workers: int = 1, gpu_type: str | None = None, tenant: str = "acme",
         topology: Topology = Topology.NONE, cpus: float = 1) -> PendingTask:
    """task is a waiting gang of ``workers`` × ``gpus`` GPUs."""
    return PendingTask(task_id=task_id, job_id=task_id.split("/")[0], tenant=tenant, kind=JobKind.TRAINING,
                       priority_class="", submit_time=0.0, workers=workers, topology=topology,
                       per_worker=ResourceVector(cpus=cpus, gpus=gpus, gpu_type=gpu_type))


def free(gpus: int, cpus: float = 64) -> list[float]:
    """free is one node's free [cpus, memory MiB, GPUs], the engine's own layout."""
    return [cpus, MEM, gpus]


def cause(nodes: list[NodeState], left: dict[str, list[float]], waiting: PendingTask,
          switches: dict[str, str] | None = None) -> str:
    """cause classifies one waiting task."""
    return classify(nodes, left, [waiting], switches)[waiting.task_id]


# --- the pure function -----------------------------------------------------------------------------------------------


def test_two_half_free_nodes_strand_a_four_gpu_job() -> None:
    nodes = [node("n0", 4), node("n1", 4)]
    assert cause(nodes, {"n0": free(2), "n1": free(2)}, task("j/0", 4)) == FRAGMENTATION


def test_two_free_gpus_are_too_few_for_four() -> None:
    assert cause([node("n0", 8)], {"n0": free(2)}, task("j/0", 4)) == SHORTAGE


def test_a_job_that_fits_now_waits_for_the_policy() -> None:
    assert cause([node("n0", 8)], {"n0": free(6)}, task("j/0", 4)) == POLICY
    assert cause([node("n0", 8)], {}, task("j/0", 8)) == POLICY  # a node left out of the free amounts is idle


def test_free_gpus_of_another_type_do_not_count() -> None:
    nodes = [node("a", 8, "a100"), node("h", 8, "h100")]
    left = {"a": free(8), "h": free(2)}
    assert cause(nodes, left, task("j/0", 4, gpu_type="h100")) == SHORTAGE
    assert cause(nodes, left, task("j/0", 4, gpu_type="a100")) == POLICY


def test_an_any_type_job_never_mixes_types() -> None:
    nodes = [node("a", 8, "a100"), node("h", 8, "h100")]
    assert cause(nodes, {"a": free(4), "h": free(4)}, task("j/0", 8)) == SHORTAGE  # 4 + 4, but of two types
    assert cause(nodes, {"a": free(4), "h": free(4)}, task("j/0", 4, workers=2)) == SHORTAGE
    nodes.append(node("b", 8, "a100"))
    assert cause(nodes, {"a": free(2), "b": free(2), "h": free(0)}, task("j/0", 4)) == FRAGMENTATION  # 2 + 2 a100


def test_free_gpus_without_cpus_beside_them_are_fragmentation() -> None:
    nodes = [node("n0", 8), node("n1", 8)]
    left = {"n0": free(4, cpus=0), "n1": free(0)}
    assert cause(nodes, left, task("j/0", 4, cpus=8)) == FRAGMENTATION


def test_a_gang_that_must_stay_on_one_switch() -> None:
    nodes = [node("n0", 4, switch="s1"), node("n1", 4, switch="s1"), node("n2", 4, switch="s2"),
             node("n3", 4, switch="s2")]
    left = {"n0": free(4), "n1": free(0), "n2": free(4), "n3": free(0)}  # one free node under each switch
    tree = {"s1": "spine", "s2": "spine"}
    required = task("g/0", 4, workers=2, topology=Topology.REQUIRE_SAME_SWITCH)
    assert cause(nodes, left, required, tree) == FRAGMENTATION
    preferred = replace(required, topology=Topology.PREFER_SAME_SWITCH)
    assert cause(nodes, left, preferred, tree) == POLICY  # it may spread: it fits now
    assert cause(nodes, {**left, "n1": free(4)}, required, tree) == POLICY


def test_a_job_over_its_quota_waits_for_the_policy() -> None:
    # the real scheduler holds acme's 2-GPU task at its 4-GPU limit though 4 GPUs are free
    nodes = (node("n0", 8),)
    running = Reservation(attempt_id="r#0", task_id="r/0", job_id="r", tenant="acme", priority_class="",
                          shares=(NodeShare("n0", ResourceVector(cpus=1, gpus=4)),), start_time=0.0)
    waiting = task("j/0", 2)
    snapshot = Snapshot(now=10.0, nodes=nodes, reservations=(running,), pending=(waiting,),
                        tenants=(TenantState("acme", limit={"*": 4}),))
    plan = schedule(snapshot)
    assert not plan.placements and plan.reasons["j/0"].code == "WaitingForQuota"
    assert cause(list(nodes), {"n0": [63, MEM, 4]}, waiting) == POLICY


# --- the engine's ledger -----------------------------------------------------------------------------------------------


def _split(result: EngineResult):
    """_split is the run's split, which the flag must have produced."""
    split = waiting_split(result)
    assert split is not None
    return split


def _total_waiting_gpu_s(result: EngineResult) -> float:
    """_total_waiting_gpu_s is the measured jobs' queue delays × their GPUs."""
    return sum(job.queue_s * job.gpus for job in result.jobs if job.measured)


def test_fifo_on_two_nodes_splits_fragmentation_and_policy_per_tenant() -> None:
    # 2 × 4 GPUs: a (2) and b (3) leave 2 + 1 free; c (3) fits no node (fragmentation) and blocks the FIFO;
    # d (1 GPU, at 1 s) would fit but waits behind c (policy); both start when a ends at 100 s
    trace = [TraceJob("a", 0, 100, 2, tenant="x"), TraceJob("b", 0, 500, 3, tenant="x"),
             TraceJob("c", 0, 50, 3, tenant="x"), TraceJob("d", 1, 50, 1, tenant="y")]
    result = Engine(trace, load_cluster("2x4"), fifo.schedule, None, EXACT).run()
    assert [job.first_start for job in result.jobs] == [0, 0, 100, 100]
    split = _split(result)
    assert split.overall.gpu_s == {SHORTAGE: 0.0, FRAGMENTATION: 300.0, POLICY: 99.0}
    assert split.overall.job_s == {SHORTAGE: 0.0, FRAGMENTATION: 100.0, POLICY: 99.0}
    assert split.by_tenant["x"].gpu_s[FRAGMENTATION] == 300 and split.by_tenant["x"].gpu_s[POLICY] == 0
    assert split.by_tenant["y"].gpu_s == {SHORTAGE: 0.0, FRAGMENTATION: 0.0, POLICY: 99.0}
    assert split.by_gpu_type["any"].total_gpu_s == pytest.approx(_total_waiting_gpu_s(result))
    assert split.jobs == 2
    # window = [0, 1] (first to last arrival): c alone waited then, and the 3 free GPUs fit no 3-GPU worker
    assert (split.stranded.mean, split.stranded.mean_while_waiting, split.stranded.free_while_waiting) == (3, 3, 3)
    data = split.as_dict()
    assert data["overall"]["gpu_hours"] == {SHORTAGE: 0.0, FRAGMENTATION: round(300 / 3600, 4),
                                            POLICY: round(99 / 3600, 4), "total": round(399 / 3600, 4)}
    assert data["overall"]["share"][FRAGMENTATION] == pytest.approx(300 / 399, abs=1e-4)
    assert data["by_tenant"]["y"]["share"][POLICY] == 1.0 and data["stranded_gpus"]["mean"] == 3
    assert [row[0] for row in split.rows()] == ["all jobs", "tenant x", "tenant y"]
    assert split.rows()[0][1:] == ["0.1", "0.0 (0%)", "0.1 (75%)", "0.0 (25%)"]


def test_a_full_node_is_shortage_per_tenant_and_type() -> None:
    # an 8-GPU a100 node and a 4-GPU t4 node; half (4 × a100) finds the a100 node full: shortage; small (2 × t4)
    # would fit its idle t4 node but the FIFO keeps it behind half: policy
    cluster = ClusterSpec(name="typed", node_groups=[NodeGroup(name="a", count=1, gpus=8, gpu_type="a100"),
                                                     NodeGroup(name="t", count=1, gpus=4, gpu_type="t4")])
    trace = [TraceJob("big", 0, 100, 8, gpu_type="a100", tenant="x"),
             TraceJob("half", 0, 50, 4, gpu_type="a100", tenant="y"),
             TraceJob("small", 0, 10, 2, gpu_type="t4", tenant="y")]
    result = Engine(trace, cluster, fifo.schedule, None, EXACT).run()
    split = _split(result)
    assert [job.queue_s for job in result.jobs] == [0, 100, 100]
    assert split.by_tenant["y"].gpu_s == {SHORTAGE: 400.0, FRAGMENTATION: 0.0, POLICY: 200.0}
    assert split.by_gpu_type["a100"].gpu_s[SHORTAGE] == 400 and split.by_gpu_type["t4"].gpu_s[POLICY] == 200
    assert "x" not in split.by_tenant  # nobody of x waited
    assert [row[0] for row in split.rows()] == ["all jobs", "tenant y", "type a100", "type t4"]


def test_time_refused_by_submit_limits_is_policy() -> None:
    from meta.policy.admission import SubmitLimits

    config = replace(EXACT, submit_limits={"x": SubmitLimits(max_pending=1)}, submit_retry_s=10.0)
    trace = [TraceJob("a", 0, 100, 4, tenant="x"), TraceJob("b", 0, 100, 4, tenant="x"),
             TraceJob("c", 0, 100, 4, tenant="x")]
    result = Engine(trace, load_cluster("1x4"), fifo.schedule, None, config).run()
    split = _split(result)
    assert split.overall.total_gpu_s == pytest.approx(_total_waiting_gpu_s(result))
    assert split.overall.gpu_s[POLICY] > 0  # c's client was refused while b was pending


@pytest.mark.parametrize("policy", ["fifo", "slurmlike", "metasched"])
def test_the_flag_changes_no_decision(policy: str) -> None:
    function, config = policies.resolve(policy)
    trace = random_trace(7)
    cluster, base = weighted_cluster(), switched_config()  # guarantees by weight, so metasched also preempts
    runs = [Engine(trace, cluster, function, config, replace(base, waiting_causes=flag)).run() for flag in (False, True)]
    plain, judged = runs

    def decisions(result: EngineResult) -> list[tuple]:
        return [(j.state, j.first_start, j.end_time, j.preemptions, j.queue_s) for j in result.jobs]

    assert decisions(plain) == decisions(judged)
    assert (plain.cycles, plain.held_reservations) == (judged.cycles, judged.held_reservations)
    assert [(s.time, s.stranded_gpus, s.pending) for s in plain.samples] == \
           [(s.time, s.stranded_gpus, s.pending) for s in judged.samples]
    assert plain.waiting is None
    split = _split(judged)
    assert split.overall.total_gpu_s == pytest.approx(_total_waiting_gpu_s(judged))
    assert split.overall.total_gpu_s > 0 and any(not j.measured for j in judged.jobs)
    assert sum(part.total_gpu_s for part in split.by_tenant.values()) == pytest.approx(split.overall.total_gpu_s)
    assert set(split.overall.gpu_s) == set(CAUSES)
