"""Reasons name the real blocker (issue 21): WaitingForQuota only where raising the limit would help.

The replay situation is the dev cluster's: 2 a100 + 2 h100 nodes of 8 GPUs and 2 t4 nodes of 4
(40 GPUs), tenant-a limited to the 16 a100, tenant-b to 40 GPUs, the whole cluster.
"""

from __future__ import annotations

from dataclasses import replace

from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from meta.policy.config import SchedulerConfig
from meta.policy.plan import Plan, ReasonCode
from meta.policy.scheduler import schedule
from meta.policy.snapshot import Snapshot
from tests.policy.builders import NOW, TenantState, node, running, snap, task
from tests.policy.invariants import check_all

Q = ReasonCode.WAITING_FOR_QUOTA
NO_HOLDS = SchedulerConfig(max_held_reservations=0)  # the bare reason, before a held start replaces it
DEV = (
    node("a100n1", gpu_type="a100"),
    node("a100n2", gpu_type="a100"),
    node("h100n1"),
    node("h100n2"),
    node("t4n1", gpus=4, gpu_type="t4"),
    node("t4n2", gpus=4, gpu_type="t4"),
)
DEV_LIMITS = (
    TenantState("tenant-a", weight=70, limit={"a100": 16}),
    TenantState("tenant-b", weight=30, limit={"*": 40}),
)


def _b(aid: str, node_name: str, gpus: int, gpu_type: str) -> object:
    """_b is a running job of tenant-b ending within the hour (so a held start can be computed)."""
    return running(aid, node_name, gpus, tenant="tenant-b", gpu_type=gpu_type, end=NOW + 1800)


# tenant-b runs 28 GPUs; 8 are free, 4 on each a100 node: no two 8-GPU nodes are free.
REPLAY_28 = (
    _b("b1", "a100n1", 4, "a100"),
    _b("b2", "a100n2", 4, "a100"),
    _b("b3", "h100n1", 8, "h100"),
    _b("b4", "h100n2", 8, "h100"),
    _b("b5", "t4n1", 4, "t4"),
)
GANG = task("gang", "tenant-b", gpus=8, gpu_type=None, workers=2)  # 16 GPUs of any type, as the replay's
EIGHT = task("eight", "tenant-b", gpus=8, gpu_type=None)


def _no_quota_words(plan: Plan, tid: str) -> None:
    """_no_quota_words: neither the message nor the remedy points at the limit."""
    reason = plan.reasons[tid]
    assert reason.code is not Q
    text = f"{reason.message} {reason.remedy}".lower()
    assert "quota" not in text and "limit" not in text, reason


def test_replay_gang_over_a_whole_cluster_limit_waits_for_capacity() -> None:
    plan = schedule(snap(DEV, [GANG], REPLAY_28, DEV_LIMITS), NO_HOLDS)
    assert plan.reasons["gang"].code is ReasonCode.WAITING_FOR_GANG_CAPACITY, plan.reasons
    assert "16 GPUs" in plan.reasons["gang"].remedy
    _no_quota_words(plan, "gang")


def test_replay_eight_gpu_job_over_a_whole_cluster_limit_waits_for_a_node() -> None:
    full = (
        *REPLAY_28,
        _b("b6", "a100n1", 4, "a100"),
        _b("b7", "t4n2", 4, "t4"),
    )  # 36 of 40: 4 free on a100n2
    plan = schedule(snap(DEV, [EIGHT], full, DEV_LIMITS), NO_HOLDS)
    reason = plan.reasons["eight"]
    assert reason.code is ReasonCode.NO_FEASIBLE_NODE and "4 are free on a100n2" in reason.message, reason
    _no_quota_words(plan, "eight")


def test_limit_at_cluster_capacity_plans_as_no_limit() -> None:
    """A limit the cluster cannot reach changes nothing: the same placements, holds and reasons."""
    pending = [
        GANG,
        EIGHT,
        task("small", "tenant-a", gpus=2, gpu_type="a100", runtime=600),
        task("b2", "tenant-b", gpus=4, gpu_type="h100", submit=NOW - 50),
    ]
    limited = snap(DEV, pending, REPLAY_28, DEV_LIMITS)
    free = snap(DEV, pending, REPLAY_28, [replace(t, limit={}) for t in DEV_LIMITS])
    for config in (SchedulerConfig(), NO_HOLDS):
        got, want = schedule(limited, config), schedule(free, config)
        assert (got.placements, got.held, got.preemptions) == (want.placements, want.held, want.preemptions)
        assert got.reasons == want.reasons
        assert Q not in {r.code for r in got.reasons.values()}
    # With holds allowed the gang over tenant-b's limit gets its held start, as it would without one.
    alone = schedule(snap(DEV, [GANG], REPLAY_28, DEV_LIMITS))
    assert alone.reasons["gang"].code is ReasonCode.HELD_FOR_GANG and [h.task_id for h in alone.held] == [
        "gang"
    ]


def test_fragmented_single_and_gang() -> None:
    """Enough GPUs free in all, none where a worker needs them: the reason says fragmented."""
    spread = (
        _b("b1", "a100n1", 4, "a100"),
        _b("b2", "a100n2", 4, "a100"),
        _b("b3", "h100n1", 4, "h100"),
        _b("b4", "h100n2", 4, "h100"),
    )  # 16 free, 4 on each 8-GPU node
    plan = schedule(snap(DEV, [EIGHT], spread, DEV_LIMITS), NO_HOLDS)
    single = plan.reasons["eight"]
    assert single.code is ReasonCode.NO_FEASIBLE_NODE and "16 are free in all, fragmented" in single.message
    assert "one node has 8 GPUs free (4 more on" in single.remedy, single
    plan = schedule(snap(DEV, [GANG], spread, DEV_LIMITS), NO_HOLDS)
    gang = plan.reasons["gang"]
    assert gang.code is ReasonCode.WAITING_FOR_GANG_CAPACITY and "fragmented" in gang.message
    assert gang.remedy == "would start when 2 nodes have 8 GPUs free", gang


def test_tenant_at_its_limit_with_free_capacity_waits_for_quota() -> None:
    tenants = [TenantState("tenant-a", limit={"a100": 8})]
    plan = schedule(
        snap(
            DEV,
            [task("a", "tenant-a", gpus=8, gpu_type="a100")],
            [running("r", "a100n1", 8, tenant="tenant-a", gpu_type="a100")],
            tenants,
        )
    )
    reason = plan.reasons["a"]
    assert reason.code is Q and "tenant-a uses 8 of its 8 a100 GPUs limit" in reason.message
    assert reason.remedy.startswith("raising tenant-a's a100 GPUs limit to 16 would start it now"), reason
    assert not plan.held and not plan.placements


def test_binding_limit_on_a_full_cluster_says_raising_helps_once_there_is_room() -> None:
    tenants = [TenantState("tenant-a", limit={"a100": 8}), TenantState("tenant-b")]
    busy = [running("r", "a100n1", 8, tenant="tenant-a", gpu_type="a100"), _b("b", "a100n2", 8, "a100")]
    plan = schedule(snap(DEV, [task("a", "tenant-a", gpus=8, gpu_type="a100")], busy, tenants))
    reason = plan.reasons["a"]
    assert reason.code is Q and "now" not in reason.remedy, reason
    assert (
        "raising tenant-a's a100 GPUs limit to 16 would let it start as soon as the cluster has room"
        in reason.remedy
    )


def test_reachable_limit_but_own_work_leaves_no_room_is_capacity_without_a_hold() -> None:
    """Over a limit below the cluster, yet not even alone would it fit: raising the limit would not help."""
    tenants = [TenantState("tenant-a", limit={"a100": 12})]
    own = [
        running("r1", "a100n1", 8, tenant="tenant-a", gpu_type="a100", end=NOW + 600),
        running("r2", "a100n2", 4, tenant="tenant-a", gpu_type="a100", end=NOW + 600),
    ]
    plan = schedule(snap(DEV, [task("a", "tenant-a", gpus=8, gpu_type="a100")], own, tenants))
    assert plan.reasons["a"].code is ReasonCode.NO_FEASIBLE_NODE, plan.reasons
    assert not plan.held  # the limit would still stop it when these end: no nodes kept idle for it


def test_this_cycles_own_placements_count_as_the_tenants_work() -> None:
    pending = [
        task("t1", "a", gpus=6, submit=NOW - 300),
        task("t2", "a", gpus=6, submit=NOW - 200),
        task("t3", "a", gpus=8, submit=NOW - 100),
    ]
    nodes = (node("h1"), node("h2"))
    # Limit 12: t1 and t2 take 6 on each node; 2 + 2 left, so t3 would not fit even without the limit.
    plan = schedule(snap(nodes, pending, tenants=[TenantState("a", limit={"h100": 12})]), NO_HOLDS)
    assert {p.task_id for p in plan.placements} == {"t1", "t2"}
    assert (
        plan.reasons["t3"].code is ReasonCode.NO_FEASIBLE_NODE
        and "own earlier tasks" in plan.reasons["t3"].message
    )
    # Limit 10: t2 is over it while h2 is free, so raising the limit would start it now.
    plan = schedule(snap(nodes, pending, tenants=[TenantState("a", limit={"h100": 10})]), NO_HOLDS)
    assert {p.task_id for p in plan.placements} == {"t1"}
    assert plan.reasons["t2"].code is Q and "would start it now" in plan.reasons["t2"].remedy


# --- property: WaitingForQuota exactly when the task would run with the limit raised -------------

LIMITS = ({}, {"a100": 8}, {"a100": 12}, {"h100": 16}, {"*": 24}, {"*": 40}, {"h100": 4, "*": 32})
CAPACITY = {"a100": 16, "h100": 16, "t4": 8, "*": 40}


@st.composite
def one_task_per_tenant(draw) -> Snapshot:
    """one_task_per_tenant draws the dev cluster with random running work, limits and one task per tenant."""
    reservations = []
    for k, n in enumerate(DEV):
        for j, tenant in enumerate(("a", "b")):
            gpus = draw(st.integers(0, n.capacity.gpus // 2))
            if gpus:
                reservations.append(
                    running(
                        f"r{k}{j}",
                        n.name,
                        gpus,
                        tenant=tenant,
                        gpu_type=n.capacity.gpu_type,
                        end=NOW + draw(st.integers(60, 7200)),
                    )
                )
    tenants = [TenantState(t, limit=draw(st.sampled_from(LIMITS))) for t in ("a", "b")]
    pending = [
        task(
            f"p{t}",
            t,
            gpus=draw(st.integers(1, 8)),
            gpu_type=draw(st.sampled_from(["a100", "h100", "t4"])),
            workers=draw(st.integers(1, 2)),
            submit=NOW - draw(st.integers(0, 600)),
        )
        for t in ("a", "b")
    ]
    return snap(DEV, pending, reservations, tenants)


def _over_reachable_limit(snapshot: Snapshot, t: object) -> bool:
    """_over_reachable_limit: at cycle start, the task breaks a limit below the cluster's capacity."""
    used: dict[str, int] = {}
    for r in snapshot.reservations:
        if r.tenant == t.tenant:
            for key in (r.shares[0].resources.gpu_type, "*"):
                used[key] = used.get(key, 0) + r.gpus()
    limits = next(x.limit for x in snapshot.tenants if x.name == t.tenant)
    need = t.per_worker.gpus * t.workers
    return any(
        used.get(k, 0) + need > cap
        for k, cap in limits.items()
        if k in (t.per_worker.gpu_type, "*") and cap < CAPACITY[k]
    )


def _runs_alone_unlimited(snapshot: Snapshot, t: object) -> bool:
    """_runs_alone_unlimited: with no limit and only its tenant's running work, the task is placed."""
    own = tuple(r for r in snapshot.reservations if r.tenant == t.tenant)
    alone = replace(snapshot, reservations=own, pending=(t,), tenants=())
    return any(p.task_id == t.task_id for p in schedule(alone, NO_HOLDS).placements)


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(one_task_per_tenant())
def test_quota_reason_iff_raising_the_limit_would_help(snapshot: Snapshot) -> None:
    plan = schedule(snapshot)
    check_all(snapshot, plan)
    for t in snapshot.pending:
        reason = plan.reasons.get(t.task_id)
        if not _over_reachable_limit(snapshot, t):
            assert reason is None or reason.code is not Q, reason
            continue
        assert reason is not None, f"{t.task_id} placed over its limit"
        assert (reason.code is Q) == _runs_alone_unlimited(snapshot, t), reason
