"""Per-cluster limits (issue 26): a tenant's limit holds on each cluster, as Slurm's GrpTRES does.

Two clusters a and b of two 8-H100 nodes each (16 GPUs a cluster). Tenant t is limited to 16 GPUs
("*"), or to 8: with ``limit_scope: cluster`` (the default) the limit holds on each cluster, so t
runs up to twice the limit across the site and waits for quota only when no cluster has room;
with ``limit_scope: site`` it is one limit over both. A site of one cluster is the same either way.
"""

from __future__ import annotations

from meta.policy.cluster_quota import cluster_quota
from meta.policy.config import SchedulerConfig
from meta.policy.plan import ReasonCode
from meta.policy.scheduler import schedule
from meta.policy.snapshot import TenantState
from tests.policy.builders import node, running, snap, task

NODES = tuple(node(f"{c}/n{i}", switch=None) for c in ("a", "b") for i in (1, 2))
SITE = SchedulerConfig(limit_scope="site")


def _limited(gpus: int) -> tuple[TenantState, ...]:
    return (TenantState("t", limit={"*": gpus}),)


def _clusters(plan, task_id: str) -> set[str]:
    placement = next(p for p in plan.placements if p.task_id == task_id)
    return {share.node.split("/")[0] for share in placement.shares}


def test_a_tenant_at_its_limit_on_one_cluster_runs_on_the_other() -> None:
    # t runs 8 on a; its limit of 8 is reached there but not on b
    snapshot = snap(NODES, [task("x", tenant="t", gpus=8)], [running("r", "a/n1", 8, tenant="t")], _limited(8))
    plan = schedule(snapshot)
    assert _clusters(plan, "x") == {"b"}
    site = schedule(snapshot, SITE)
    assert not site.placements and site.reasons["x"].code is ReasonCode.WAITING_FOR_QUOTA


def test_the_limit_holds_on_every_cluster_within_one_cycle() -> None:
    # limit 8: two 8-GPU tasks go one to each cluster; the third waits for quota
    tasks = [task(f"x{i}", tenant="t", gpus=8, submit=1000.0 + i) for i in range(3)]
    plan = schedule(snap(NODES, tasks, (), _limited(8)))
    placed = {p.task_id: _clusters(plan, p.task_id) for p in plan.placements}
    assert sorted(c for cs in placed.values() for c in cs) == ["a", "b"], placed
    (waiting,) = {t.task_id for t in tasks} - set(placed)
    assert plan.reasons[waiting].code is ReasonCode.WAITING_FOR_QUOTA
    assert "limit" in plan.reasons[waiting].message


def test_a_job_confined_to_the_full_cluster_waits_for_quota() -> None:
    snapshot = snap(NODES, [task("x", tenant="t", gpus=8, clusters=frozenset({"a"}))],
                    [running("r", "a/n1", 8, tenant="t")], _limited(8))  # fmt: skip
    plan = schedule(snapshot)
    assert not plan.placements and plan.reasons["x"].code is ReasonCode.WAITING_FOR_QUOTA


def test_a_limit_as_large_as_a_cluster_never_stops_a_task_there() -> None:
    # limit 16 = each cluster's GPUs: Slurm would let t fill both clusters, and so does metasched
    reservations = [running(f"r{i}", f"a/n{i}", 8, tenant="t") for i in (1, 2)] + [running("r3", "b/n1", 8, tenant="t")]
    plan = schedule(snap(NODES, [task("x", tenant="t", gpus=8)], reservations, _limited(16)))
    assert _clusters(plan, "x") == {"b"}


def test_one_cluster_is_the_same_either_way() -> None:
    one = tuple(node(f"n{i}", switch=None) for i in (1, 2, 3))
    snapshot = snap(one, [task("x", tenant="t", gpus=8)], [running("r", "n1", 8, tenant="t")], _limited(8))
    for config in (SchedulerConfig(), SITE):
        plan = schedule(snapshot, config)
        assert not plan.placements and plan.reasons["x"].code is ReasonCode.WAITING_FOR_QUOTA


def test_the_ledger_counts_each_reservation_on_its_cluster() -> None:
    ledger = cluster_quota(["a", "a", "b"], ["h100", "h100", "a100"], [8, 8, 4],
                           [([(0, 8)], "t", "h100", 8), ([(2, 4)], "t", "a100", 4), ([], "u", None, 0)])  # fmt: skip
    assert ledger.capacity == {"a": {"h100": 16, "*": 16}, "b": {"a100": 4, "*": 4}}
    assert ledger.with_room({"*": 8}, "t", "h100", 8, {"a", "b"}) == frozenset({"b"})  # b's 4 < its limit of 8: unreachable
    assert ledger.broken_on({"*": 8}, "t", "a", "h100", 8) == ("*", 8, 8)
    assert ledger.broken_everywhere({"h100": 8}, "t", "h100", 8, {"a"}) == ("h100", 8, 8)
    assert ledger.broken_everywhere({"h100": 8}, "t", "h100", 8, {"a", "b"}) is None


def test_a_cluster_with_its_own_association_limit_holds_the_tenant_to_it() -> None:
    # t's association on b allows 8 GPUs, on a its site-wide 16 holds (a's capacity: never the blocker)
    own = (TenantState("t", limit={"*": 16}, cluster_limits={"b": {"*": 8}}),)
    full_a = [running(f"r{i}", f"a/n{i}", 8, tenant="t") for i in (1, 2)]
    on_b = full_a + [running("r3", "b/n1", 8, tenant="t")]
    assert _clusters(schedule(snap(NODES, [task("x", tenant="t", gpus=8)], full_a, own)), "x") == {"b"}
    # with 8 running on b, b's own limit stops x there although b/n2 is free; a is full
    plan = schedule(snap(NODES, [task("x", tenant="t", gpus=8)], on_b, own))
    assert not plan.placements and plan.reasons["x"].code is not ReasonCode.WAITING_FOR_QUOTA
    assert "b/n2" not in plan.reasons["x"].message  # b's free node is not one x may use
    # confined to b, the limit is what stops it
    plan = schedule(snap(NODES, [task("x", tenant="t", gpus=8, clusters=frozenset({"b"}))], on_b, own))
    assert not plan.placements and plan.reasons["x"].code is ReasonCode.WAITING_FOR_QUOTA
    # the same reservations without b's own limit: the site-wide 16 = b's capacity never stops x there
    assert _clusters(schedule(snap(NODES, [task("x", tenant="t", gpus=8)], on_b, _limited(16))), "x") == {"b"}


def test_a_tenant_limited_only_on_one_cluster_goes_to_the_other() -> None:
    # no site-wide limit; b's association allows t nothing beyond its 8 running there
    own = (TenantState("t", cluster_limits={"b": {"*": 8}}),)
    snapshot = snap(NODES, [task("x", tenant="t", gpus=8, clusters=frozenset({"b"})), task("y", tenant="t", gpus=8)],
                    [running("r", "b/n1", 8, tenant="t")], own)  # fmt: skip
    plan = schedule(snapshot)
    assert plan.reasons["x"].code is ReasonCode.WAITING_FOR_QUOTA
    assert _clusters(plan, "y") == {"a"}
    # site scope: one limit over the site, and t has none
    assert {p.task_id for p in schedule(snapshot, SITE).placements} == {"x", "y"}
