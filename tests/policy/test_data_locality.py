"""Data locality and checkpoint stickiness (issue 26, ``meta/policy/data_locality.py``): pure placement rules."""

from __future__ import annotations

from dataclasses import replace

from meta.policy.cluster_fit import Fit, static_fit, task_fit
from meta.policy.data_locality import pin, pinned, preferred, waits_for_pin
from meta.policy.plan import PendingReason, ReasonCode
from meta.policy.scheduler import schedule
from meta.policy.shape import shape_of
from meta.policy.snapshot import TenantState
from tests.policy.builders import node, running, snap, task

# two clusters of two 8-H100 nodes each, flat; emu sorts first, so a tie goes there without a preference
EMU = tuple(node(f"emu/n{i}", switch=None) for i in (1, 2))
DEV2 = tuple(node(f"dev2/n{i}", switch=None) for i in (1, 2))
SITE = EMU + DEV2
NEVER = ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE
NONE: frozenset[str] = frozenset()


def _clusters(plan: object, task_id: str) -> set[str]:
    placement = next(p for p in plan.placements if p.task_id == task_id)  # type: ignore[attr-defined]
    return {share.node.split("/")[0] for share in placement.shares}


def _placed_on(pending: list, reservations: list | None = None, tenants: list | None = None) -> dict[str, set[str]]:
    plan = schedule(snap(SITE, pending, reservations or [], tenants or []))
    return {p.task_id: _clusters(plan, p.task_id) for p in plan.placements}


def test_without_data_the_tie_goes_where_it_always_went() -> None:
    # the control: the preferred tests below only mean something if emu would win otherwise
    assert _placed_on([task("t", gpus=1)]) == {"t": {"emu"}}


def test_a_preferred_data_cluster_wins_a_tie() -> None:
    assert _placed_on([task("t", gpus=1, data_cluster="dev2")]) == {"t": {"dev2"}}


def test_a_preferred_data_cluster_wins_over_a_tighter_fit_elsewhere() -> None:
    # emu/n1 has exactly 4 free (best fit); dev2 is empty: the data cluster still wins while it has room
    busy = [running("r", "emu/n1", 4)]
    assert _placed_on([task("t", gpus=4)], busy) == {"t": {"emu"}}
    assert _placed_on([task("t", gpus=4, data_cluster="dev2")], busy) == {"t": {"dev2"}}


def test_a_preferred_data_cluster_without_room_places_elsewhere_rather_than_wait() -> None:
    full = [running("r1", "dev2/n1", 8), running("r2", "dev2/n2", 8)]
    plan = schedule(snap(SITE, [task("t", gpus=8, data_cluster="dev2")], full))
    assert _clusters(plan, "t") == {"emu"} and "t" not in plan.reasons


def test_a_preferred_gang_stays_whole_on_the_data_cluster() -> None:
    placed = _placed_on([task("g", gpus=8, workers=2, one_per_node=True, data_cluster="dev2")])
    assert placed == {"g": {"dev2"}}


def test_preferred_tasks_fill_the_data_cluster_first_then_spill_over() -> None:
    pending = [task(f"t{i}", gpus=8, data_cluster="dev2") for i in range(3)]
    placed = _placed_on(pending)
    assert sorted(c for cs in placed.values() for c in cs) == ["dev2", "dev2", "emu"]


def test_a_preference_outside_the_jobs_clusters_is_ignored() -> None:
    placed = _placed_on([task("t", gpus=1, clusters=frozenset({"emu"}), data_cluster="dev2")])
    assert placed == {"t": {"emu"}}


def test_required_data_is_a_hard_filter() -> None:
    full = [running("r1", "dev2/n1", 8), running("r2", "dev2/n2", 8)]
    plan = schedule(snap(SITE, [task("t", gpus=8, data_cluster="dev2", data_required=True)], full))
    assert not plan.placements
    reason = plan.reasons["t"]
    assert reason.code is not NEVER and reason.code in (ReasonCode.NO_FEASIBLE_NODE, ReasonCode.LOWER_FAIR_SHARE,
                                                        ReasonCode.BLOCKED_BY_RESERVATION)
    assert _placed_on([task("t", gpus=8, data_cluster="dev2", data_required=True)]) == {"t": {"dev2"}}


def test_required_data_outside_the_tenants_clusters_is_unresolvable() -> None:
    tenants = [TenantState("a", clusters=frozenset({"emu"}))]
    plan = schedule(snap(SITE, [task("t", gpus=1, data_cluster="dev2", data_required=True)], [], tenants))
    reason = plan.reasons["t"]
    assert not plan.placements and reason.code is NEVER
    assert reason.message.startswith("its data must be read on dev2 (data.required), but it may run only on "
                                     "the clusters emu")


def test_required_data_on_a_cluster_the_site_lacks_is_unresolvable() -> None:
    plan = schedule(snap(SITE, [task("t", gpus=1, data_cluster="dev3", data_required=True)]))
    assert plan.reasons["t"].code is NEVER and "dev3" in plan.reasons["t"].message


def test_a_retry_resumes_only_on_the_cluster_of_its_checkpoint() -> None:
    # emu is empty and dev2 half busy: without the pin the retry would go to emu
    plan = schedule(snap(SITE, [task("t", gpus=8, checkpoint_cluster="dev2")], [running("r", "dev2/n1", 8)]))
    assert _clusters(plan, "t") == {"dev2"}


def test_a_retry_waits_for_its_full_checkpoint_cluster() -> None:
    full = [running("r1", "dev2/n1", 8), running("r2", "dev2/n2", 8)]
    plan = schedule(snap(SITE, [task("t", gpus=8, checkpoint_cluster="dev2")], full))
    assert not plan.placements and plan.reasons["t"].code is not NEVER


def test_a_retry_whose_checkpoint_cluster_is_drained_or_dark_waits_and_says_so() -> None:
    # the daemon drains a drained or dark cluster's nodes for the policy (without_dark_clusters)
    dark = tuple(replace(n, drained=True) for n in DEV2)
    plan = schedule(snap(EMU + dark, [task("t", gpus=1, checkpoint_cluster="dev2")]))
    reason = plan.reasons["t"]
    assert not plan.placements and reason.code is ReasonCode.NODE_UNHEALTHY
    assert reason.message.startswith("it resumes from a checkpoint written on dev2, readable only there; dev2 has "
                                     "no node up that could host it")
    assert "rather than lose the checkpoint" in reason.message and "cluster resume dev2" in reason.remedy


def test_a_checkpoint_outside_the_tenants_clusters_now_is_unresolvable() -> None:
    tenants = [TenantState("a", clusters=frozenset({"emu"}))]
    plan = schedule(snap(SITE, [task("t", gpus=1, checkpoint_cluster="dev2")], [], tenants))
    assert plan.reasons["t"].code is NEVER and "checkpoint written on dev2" in plan.reasons["t"].message


def test_the_checkpoint_pin_outranks_a_preferred_data_cluster() -> None:
    assert _placed_on([task("t", gpus=1, checkpoint_cluster="emu", data_cluster="dev2")]) == {"t": {"emu"}}


def test_required_data_and_a_checkpoint_on_two_clusters_is_unresolvable() -> None:
    plan = schedule(snap(SITE, [task("t", gpus=1, data_cluster="dev2", data_required=True, checkpoint_cluster="emu")]))
    reason = plan.reasons["t"]
    assert reason.code is NEVER and reason.message.startswith("no single cluster: ")


def test_the_pure_rules() -> None:
    plain = task("t")
    assert pinned(plain) == {} and pin(plain, NONE) == (NONE, None) and preferred(plain, NONE) is None
    soft = task("t", data_cluster="dev2")
    assert pinned(soft) == {} and preferred(soft, NONE) == "dev2"
    assert preferred(soft, frozenset({"emu", "dev2"})) == "dev2"
    assert preferred(soft, frozenset({"dev2"})) is None  # nothing to prefer it over
    assert preferred(soft, frozenset({"emu"})) is None  # not allowed there
    hard = task("t", data_cluster="dev2", data_required=True)
    assert pin(hard, NONE) == (frozenset({"dev2"}), None) and preferred(hard, NONE) is None
    assert pin(hard, frozenset({"emu", "dev2"})) == (frozenset({"dev2"}), None)
    both = task("t", data_cluster="dev2", data_required=True, checkpoint_cluster="dev2")
    assert list(pinned(both)) == ["dev2"] and pin(both, NONE)[1] is None
    other = PendingReason(ReasonCode.NO_FEASIBLE_NODE, "no room", "wait")
    told = waits_for_pin(hard, other)
    assert told.code is ReasonCode.NO_FEASIBLE_NODE and told.message.startswith("its data must be read on dev2")
    assert waits_for_pin(plain, other) is other


def test_explain_verdicts_for_required_data() -> None:
    fits = static_fit(shape_of(task("t", gpus=1)), SITE, data="dev2")
    verdicts = {f.cluster: f for f in fits}
    assert verdicts["emu"].verdict is Fit.DATA_ELSEWHERE and verdicts["emu"].message == (
        "the job's data lives on dev2 (data.required)")
    assert verdicts["dev2"].verdict is Fit.FITS
    # the job's own -M list comes first
    listed = static_fit(shape_of(task("t", gpus=1, clusters=frozenset({"dev2"}))), SITE, data="dev2")
    assert {f.cluster: f.verdict for f in listed} == {"emu": Fit.NOT_LISTED, "dev2": Fit.FITS}


def test_explain_verdicts_for_a_checkpoint() -> None:
    static = static_fit(shape_of(task("t", gpus=1)), SITE, {"dev2": "firmware"})
    fits = {f.cluster: f for f in task_fit(static, waiting="NodeUnhealthy", checkpoint="dev2",
                                           placed=["dev2/n1"], attempt="ran (attempt 1: failed)")}
    assert fits["emu"].verdict is Fit.CHECKPOINT_ELSEWHERE
    assert fits["emu"].message == "resumes from a checkpoint written on dev2, readable only there"
    assert fits["dev2"].verdict is Fit.DRAINED and "the retry waits for it" in fits["dev2"].message
    # a running task is where it is: no checkpoint verdicts
    running_now = task_fit(static_fit(shape_of(task("t", gpus=1)), SITE), placed=["dev2/n1"], attempt="runs",
                           checkpoint="dev2")
    assert {f.cluster: f.verdict for f in running_now} == {"emu": Fit.FITS, "dev2": Fit.PLACED}


def test_explain_names_a_preferred_data_cluster() -> None:
    static = static_fit(shape_of(task("t", gpus=1)), SITE)
    fits = {f.cluster: f for f in task_fit(static, waiting="", data="dev2")}
    assert fits["dev2"].message.endswith("; the job's data lives here (preferred)")
    assert "data" not in fits["emu"].message
    placed = {f.cluster: f for f in task_fit(static, placed=["dev2/n1"], attempt="runs", data="dev2")}
    assert placed["dev2"].verdict is Fit.PLACED and placed["dev2"].message == (
        "runs here on dev2/n1; the job's data lives here (preferred)")
