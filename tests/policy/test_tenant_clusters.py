"""Where a tenant may run (issue 26): an admin's clusters for a tenant narrow its tasks' -M lists."""

from __future__ import annotations

from meta.policy.feasibility import never_feasible
from meta.policy.plan import ReasonCode
from meta.policy.scheduler import schedule
from meta.policy.snapshot import TenantState
from meta.policy.tenant_clusters import allowed_clusters, confine, outside_tenant
from tests.policy.builders import node, running, snap, task

# two clusters of two 8-H100 nodes each, no switch tree: each cluster is one flat switch
EMU = tuple(node(f"emu/n{i}", switch=None) for i in (1, 2))
DEV2 = tuple(node(f"dev2/n{i}", switch=None) for i in (1, 2))
ONLY_DEV2 = TenantState("a", clusters=frozenset({"dev2"}))
NEVER = ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE


def _clusters(plan: object, task_id: str) -> set[str]:
    placement = next(p for p in plan.placements if p.task_id == task_id)  # type: ignore[attr-defined]
    return {share.node.split("/")[0] for share in placement.shares}


def test_a_tenant_confined_to_dev2_never_gets_emu_nodes() -> None:
    # emu is empty, dev2 half busy: without the confinement most of these would go to emu
    pending = [task(f"t{i}", gpus=4) for i in range(6)]
    plan = schedule(snap(EMU + DEV2, pending, [running("r", "dev2/n1", 8)], tenants=[ONLY_DEV2]))
    placed = {p.task_id for p in plan.placements}
    assert placed == {"t0", "t1"}  # dev2/n2's 8 GPUs: two tasks of 4
    assert all(_clusters(plan, tid) == {"dev2"} for tid in placed)
    # the rest wait for dev2's capacity: a capacity reason, never "unresolvable"
    assert all(plan.reasons[f"t{i}"].code is not NEVER for i in range(2, 6))


def test_another_tenant_is_not_confined() -> None:
    plan = schedule(snap(EMU + DEV2, [task("b1", tenant="b", gpus=8)], [running("r", "dev2/n1", 8),
                                                                          running("s", "dev2/n2", 8)],
                         tenants=[ONLY_DEV2, TenantState("b")]))
    assert _clusters(plan, "b1") == {"emu"}


def test_a_job_list_naming_both_is_narrowed_to_the_tenants_cluster() -> None:
    both = frozenset({"emu", "dev2"})
    plan = schedule(snap(EMU + DEV2, [task("t", gpus=8, clusters=both)], [running("r", "dev2/n1", 8)],
                         tenants=[ONLY_DEV2]))
    assert _clusters(plan, "t") == {"dev2"}


def test_a_job_list_naming_none_of_the_tenants_clusters_is_unresolvable() -> None:
    plan = schedule(snap(EMU + DEV2, [task("t", gpus=1, clusters=frozenset({"emu"}))], tenants=[ONLY_DEV2]))
    reason = plan.reasons["t"]
    assert not plan.placements and reason.code is NEVER
    assert reason.message == "tenant a may run only on the clusters dev2; the job's --clusters names emu"
    assert "--clusters dev2" in reason.remedy


def test_a_gang_larger_than_the_tenants_cluster_is_unresolvable_though_emu_and_dev2_fit_it_together() -> None:
    plan = schedule(snap(EMU + DEV2, [task("g", gpus=8, workers=3)], tenants=[ONLY_DEV2]))
    assert plan.reasons["g"].code is NEVER and not plan.placements


def test_a_tenant_confined_to_a_cluster_the_site_lacks_is_unresolvable() -> None:
    plan = schedule(snap(EMU, [task("t", gpus=1)], tenants=[TenantState("a", clusters=frozenset({"dev3"}))]))
    assert plan.reasons["t"].code is NEVER and "--clusters" in plan.reasons["t"].message


def test_the_pure_rules() -> None:
    none: frozenset[str] = frozenset()
    emu, dev2, both = frozenset({"emu"}), frozenset({"dev2"}), frozenset({"emu", "dev2"})
    assert allowed_clusters(none, none) == none and allowed_clusters(emu, none) == emu
    assert allowed_clusters(none, dev2) == dev2 and allowed_clusters(both, dev2) == dev2
    plain = task("t")
    assert confine(plain, none) is plain and confine(plain, dev2).clusters == dev2
    assert outside_tenant(task("t", clusters=emu), dev2) is not None
    assert outside_tenant(task("t", clusters=both), dev2) is None and outside_tenant(plain, dev2) is None


def test_never_feasible_sees_the_confinement_it_is_handed() -> None:
    # emu has the A100s the task asks for; the tenant may use dev2's H100s only
    site = (node("emu/a1", gpu_type="a100", switch=None), *DEV2)
    wants_a100 = task("t", gpus=1, gpu_type="a100")
    assert never_feasible(wants_a100, site) is None
    reason = never_feasible(confine(wants_a100, frozenset({"dev2"})), site)
    assert reason is not None and reason.code is NEVER
