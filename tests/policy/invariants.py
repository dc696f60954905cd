"""Plan invariants shared by table and property tests: no over-allocation, whole gangs, holds kept."""

from __future__ import annotations

from collections import defaultdict
from dataclasses import replace

from meta.policy.config import SchedulerConfig
from meta.policy.feasibility import never_feasible
from meta.policy.plan import Plan
from meta.policy.snapshot import PendingTask, Snapshot


def _use(acc: dict, node: str, r, sign: int = 1) -> None:
    a = acc[node]
    a[0] += sign * r.gpus
    a[1] += sign * r.cpus
    a[2] += sign * r.memory_mib
    a[3] += sign * r.storage_gib


def check_capacity(snapshot: Snapshot, plan: Plan) -> None:
    """check_capacity: reservations + placements never exceed any node, GPU types always match."""
    nodes = {n.name: n for n in snapshot.nodes}
    used: dict[str, list[float]] = defaultdict(lambda: [0, 0.0, 0, 0])
    for r in snapshot.reservations:
        for s in r.shares:
            _use(used, s.node, s.resources)
    before = {k: list(v) for k, v in used.items()}
    for p in plan.placements:
        for s in p.shares:
            n = nodes[s.node]
            assert n.schedulable(), f"{p.task_id} placed on unschedulable {s.node}"
            if s.resources.gpus:
                assert s.resources.gpu_type == n.capacity.gpu_type, f"{p.task_id} mixes GPU types"
            _use(used, s.node, s.resources)
    for name, (g, c, m, st) in used.items():
        cap = nodes[name].capacity
        pre = before.get(name, [0, 0.0, 0, 0])
        # A node already over-reserved by the snapshot must not receive anything more.
        assert g <= max(cap.gpus, pre[0]) and c <= max(cap.cpus, pre[1]) + 1e-6, f"{name} over-allocated"
        assert m <= max(cap.memory_mib, pre[2]) and st <= max(cap.storage_gib, pre[3]), f"{name} over-allocated"
        if any(pre[k] > lim for k, lim in enumerate((cap.gpus, cap.cpus, cap.memory_mib, cap.storage_gib))):
            assert [g, c, m, st] == pre, f"{name} was full but got more"


def check_tasks(snapshot: Snapshot, plan: Plan, config: SchedulerConfig | None = None) -> None:
    """check_tasks: gangs whole, each pending task placed or with exactly one reason, limits hold."""
    pending = {t.task_id: t for t in snapshot.pending}
    placed = [p.task_id for p in plan.placements]
    assert len(placed) == len(set(placed)), "a task placed twice"
    assert set(placed).isdisjoint(plan.reasons), "a placed task also has a reason"
    assert set(placed) | set(plan.reasons) == set(pending), "a pending task has neither placement nor reason"
    for p in plan.placements:
        t = pending[p.task_id]
        # avoided nodes are used only when avoiding them would leave no possible host at all
        may_use_avoided = _avoiding_strands(t, snapshot)
        assert len(p.shares) == max(1, t.workers), f"{t.task_id} gang not whole"
        assert len({s.resources.gpu_type for s in p.shares}) == 1, f"{t.task_id} mixes GPU types"
        for s in p.shares:
            r = s.resources
            w = t.per_worker
            assert (r.gpus, r.cpus, r.memory_mib, r.storage_gib) == (w.gpus, w.cpus, w.memory_mib, w.storage_gib)
            assert may_use_avoided or s.node not in t.avoid_nodes, f"{t.task_id} placed on avoided {s.node}"
            if w.gpus and w.gpu_type:
                assert r.gpu_type == w.gpu_type
    _check_limits(snapshot, plan)


def _avoiding_strands(task: PendingTask, snapshot: Snapshot) -> bool:
    """_avoiding_strands tells whether no node could ever host the task while it avoids its nodes."""
    if not task.avoid_nodes:
        return False
    usable = [n for n in snapshot.nodes if n.name not in task.avoid_nodes]
    return never_feasible(replace(task, avoid_nodes=frozenset()), usable) is not None


def _check_limits(snapshot: Snapshot, plan: Plan) -> None:
    """_check_limits: no tenant goes above a GPU limit because of this plan."""
    node_type = {n.name: n.capacity.gpu_type for n in snapshot.nodes}
    used: dict[tuple[str, str], int] = defaultdict(int)
    for r in snapshot.reservations:
        for s in r.shares:
            used[(r.tenant, node_type[s.node] or "")] += s.resources.gpus
            used[(r.tenant, "*")] += s.resources.gpus
    before = dict(used)
    tenant_of = {t.task_id: t.tenant for t in snapshot.pending}
    for p in plan.placements:
        for s in p.shares:
            used[(tenant_of[p.task_id], node_type[s.node] or "")] += s.resources.gpus
            used[(tenant_of[p.task_id], "*")] += s.resources.gpus
    for t in snapshot.tenants:
        for key, limit in t.limit.items():
            now, pre = used.get((t.name, key), 0), before.get((t.name, key), 0)
            assert now <= max(limit, pre) and (pre <= limit or now == pre), f"{t.name} over {key} limit"


def check_holds(snapshot: Snapshot, plan: Plan) -> None:
    """check_holds: at each held start, the held nodes have room for the held task (no delay)."""
    pending = {t.task_id: t for t in snapshot.pending}
    nodes = {n.name: n for n in snapshot.nodes}
    for h in plan.held:
        t = pending[h.task_id]
        free = {n: [nodes[n].capacity.gpus, nodes[n].capacity.cpus, nodes[n].capacity.memory_mib,
                    nodes[n].capacity.storage_gib] for n in h.nodes}
        preempted = {p.attempt_id for p in plan.preemptions}
        for r in snapshot.reservations:
            gone = r.stopping or r.attempt_id in preempted or (
                r.expected_end is not None and max(r.expected_end, snapshot.now) <= h.planned_start)
            if not gone:
                for s in r.shares:
                    if s.node in free:
                        _use(free, s.node, s.resources, -1)
        for p in plan.placements:
            if snapshot.now + pending[p.task_id].runtime_estimate_s > h.planned_start:
                for s in p.shares:
                    if s.node in free:
                        _use(free, s.node, s.resources, -1)
        w = t.per_worker
        slots = 0
        for g, c, m, st in free.values():
            n = 1 << 30
            for have, need in ((g, w.gpus), (c, w.cpus), (m, w.memory_mib), (st, w.storage_gib)):
                if need:
                    n = min(n, int((have + 1e-9) // need))
            slots += max(0, n if n != 1 << 30 else t.workers)
        assert slots >= t.workers, f"hold for {t.task_id} at {h.planned_start} has room for {slots} workers"


def check_all(snapshot: Snapshot, plan: Plan) -> None:
    """check_all runs every plan invariant."""
    check_capacity(snapshot, plan)
    check_tasks(snapshot, plan)
    check_holds(snapshot, plan)
