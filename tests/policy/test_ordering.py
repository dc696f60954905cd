"""Order: GPU-type-weighted fair share, decayed usage, priority classes, aging and deadlines."""

from __future__ import annotations

from dataclasses import replace

import pytest

from meta.policy.config import SchedulerConfig
from meta.policy.plan import ReasonCode
from tests.policy.builders import NOW, Case, JobKind, TenantState, node, run_case, running, snap, task, turns

# Tenant a runs 2 h100 GPUs (cost 6), tenant b runs 4 t4 GPUs (cost 2); one a100 GPU is free.
WEIGHTED = (
    node("hn", gpus=2, cpus=0, mem=0),
    node("tn", gpus=4, gpu_type="t4", cpus=0, mem=0),
    node("an", gpus=1, gpu_type="a100", cpus=0, mem=0),
)
WEIGHTED_RUNNING = (running("ra", "hn", 2, tenant="a"), running("rb", "tn", 4, tenant="b", gpu_type="t4"))
# These cases test strict fair-share turns and the 4 h aging bound, not the shipped defaults
# (shortest-first borrowers, 24 h aging): cases without a config of their own run this one.
SHARE_ORDER = turns(fair_share_horizon_s=None, max_wait_s=4 * 3600.0)
FLAT = turns(gpu_cost_weights={}, default_gpu_cost_weight=1.0, fair_share_horizon_s=None)
ONE_FREE = [node("n1", gpus=1)]

CASES = [
    Case("h100 usage weighs more than t4 usage",
         snap(WEIGHTED, [task("ta", "a", gpu_type="a100"), task("tb", "b", gpu_type="a100", submit=NOW - 10)],
              WEIGHTED_RUNNING),
         want_placed={"tb"}, want_waiting={"ta": ReasonCode.LOWER_FAIR_SHARE}),
    Case("without cost weights the GPU count decides",
         snap(WEIGHTED, [task("ta", "a", gpu_type="a100"), task("tb", "b", gpu_type="a100", submit=NOW - 10)],
              WEIGHTED_RUNNING),
         want_placed={"ta"}, want_waiting={"tb": ReasonCode.LOWER_FAIR_SHARE}, config=FLAT),
    Case("decayed usage counts",
         snap(ONE_FREE, [task("ta", "a", submit=NOW - 500), task("tb", "b")],
              tenants=[TenantState("a", decayed_usage=1e6), TenantState("b")]),
         want_placed={"tb"}, want_waiting={"ta": ReasonCode.LOWER_FAIR_SHARE}),
    Case("tenant weight divides the share",
         snap(ONE_FREE, [task("ta", "a", submit=NOW - 500), task("tb", "b")],
              tenants=[TenantState("a", decayed_usage=1e6), TenantState("b", weight=10, decayed_usage=5e6)]),
         want_placed={"tb"}),
    Case("tenants take turns",
         snap([node("n1", gpus=4)], [task(f"a{i}", "a", submit=NOW - 100 + i) for i in range(4)]
              + [task(f"b{i}", "b", submit=NOW - 50 + i) for i in range(4)]),
         want_placed={"a0", "a1", "b0", "b1"}),
    Case("with a share horizon a busier tenant's short job passes a long one",
         snap(ONE_FREE, [task("short", "a", runtime=60), task("long", "b", runtime=36_000)],
              tenants=[TenantState("a", decayed_usage=1e6), TenantState("b")]),
         want_placed={"short"}, config=turns(fair_share_horizon_s=1e5)),
    Case("a long share horizon is the share order again",
         snap(ONE_FREE, [task("short", "a", runtime=60), task("long", "b", runtime=36_000)],
              tenants=[TenantState("a", decayed_usage=1e6), TenantState("b")]),
         want_placed={"long"}, config=turns(fair_share_horizon_s=1e7)),
    Case("training outranks evaluation",
         snap(ONE_FREE, [task("ev", "b", kind=JobKind.EVALUATION, submit=NOW - 900), task("tr", "a")],
              tenants=[TenantState("a", decayed_usage=1e9)]),
         want_placed={"tr"}, want_waiting={"ev": ReasonCode.LOWER_PRIORITY}),
    Case("inference with a deadline outranks training",
         snap(ONE_FREE, [task("tr", "a", submit=NOW - 900),
                         task("inf", "b", kind=JobKind.INFERENCE, deadline=NOW + 50_000)]),
         want_placed={"inf"}, want_waiting={"tr": ReasonCode.LOWER_PRIORITY}),
    Case("plain inference is below training",
         snap(ONE_FREE, [task("tr", "a"), task("inf", "b", kind=JobKind.INFERENCE, submit=NOW - 900)]),
         want_placed={"tr"}),
    Case("aged task outranks fair share and priority",
         snap(ONE_FREE, [task("tr", "b"), task("old", "a", kind=JobKind.EVALUATION, submit=NOW - 13 * 3600)],
              tenants=[TenantState("a", decayed_usage=1e9)]),
         want_placed={"old"}),
    Case("urgent deadline first within the class",
         snap(ONE_FREE, [task("early", "a", kind=JobKind.INFERENCE, deadline=NOW + 40_000, submit=NOW - 900),
                         task("urgent", "a", kind=JobKind.INFERENCE, deadline=NOW + 4000)]),
         want_placed={"urgent"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_order(case: Case) -> None:
    _run(case)


def _run(case: Case):
    """_run runs a case under SHARE_ORDER unless it brings its own config."""
    return run_case(case if case.config is not None else replace(case, config=SHARE_ORDER))


def test_fair_share_message_names_the_shares() -> None:
    plan = _run(CASES[0])
    reason = plan.reasons["ta"]
    assert reason.blocking_tenant == "b"
    assert "b is ahead in fair share (share 0.20 vs yours 0.60)" in reason.message


def test_waiting_is_bounded_by_aging() -> None:
    """A task from a tenant with huge usage still starts once it has waited max_wait."""
    cfg = turns(max_wait_s=3600)
    heavy = [TenantState("heavy", decayed_usage=1e12)]
    fresh = [task(f"f{i}", f"t{i}", submit=NOW - 10) for i in range(20)]
    young = snap(ONE_FREE, [task("h", "heavy", kind=JobKind.EVALUATION, submit=NOW - 3599), *fresh],
                 tenants=heavy)
    from meta.policy.scheduler import schedule

    assert "h" not in {p.task_id for p in schedule(young, cfg).placements}
    aged = snap(ONE_FREE, [task("h", "heavy", kind=JobKind.EVALUATION, submit=NOW - 3600), *fresh], tenants=heavy)
    assert [p.task_id for p in schedule(aged, cfg).placements] == ["h"]


def test_guaranteed_tasks_merge_shortest_first_when_not_in_share_order() -> None:
    # One free GPU; a and b both inside their guarantees. a has used more (decayed usage), so in
    # strict share order b's long task goes first; merged by the horizon (0 = shortest first),
    # a's short task does. Either way they go before the borrower c.
    from meta.policy.scheduler import schedule

    tenants = [TenantState("a", guaranteed={"*": 4}, decayed_usage=1e6), TenantState("b", guaranteed={"*": 4}),
               TenantState("c")]
    pending = [task("a-short", "a", runtime=600), task("b-long", "b", runtime=36_000), task("c", "c", runtime=60)]
    s = snap(ONE_FREE, pending, tenants=tenants)
    base = turns(fair_share_horizon_s=0.0, guaranteed_in_share_order=True)
    assert [p.task_id for p in schedule(s, base).placements] == ["b-long"]
    merged = turns(fair_share_horizon_s=0.0, guaranteed_in_share_order=False)
    assert [p.task_id for p in schedule(s, merged).placements] == ["a-short"]


def _order(s, cfg: SchedulerConfig) -> list[str]:
    """_order is the scheduling order of a snapshot's pending tasks under ``cfg`` (no placements)."""
    from meta.policy.ordering import ordered
    from meta.policy.scheduler import SchedulePass

    return [t.task_id for t in ordered(s.pending, SchedulePass(s, cfg).fair, cfg, s.now)]


def _long_behind_shorts(tenants=()):
    """_long_behind_shorts: a's 2-h job, then b's 60-s jobs submitted every 10 minutes for 5 hours."""
    start = NOW - 6 * 3600
    shorts = [task(f"b{i}", "b", runtime=60, submit=start + 600 * (i + 1)) for i in range(30)]
    pending = [task("long", "a", runtime=7200, submit=start), *shorts]
    return start, shorts, snap(ONE_FREE, pending, tenants=tenants)


@pytest.mark.parametrize("horizon", [0.0, None, 86_400.0])
def test_the_length_cap_bounds_how_much_later_work_passes_a_long_job(horizon) -> None:
    # Uncapped (the issue's shipped order) the long job's key is submit + 10 x 2 h = +20 h, so
    # every one of b's 30 short jobs, submitted up to 5 h after it, goes first. Capped at 1 h,
    # only the short jobs submitted within the hour after it may pass it, in every horizon mode.
    start, shorts, s = _long_behind_shorts()
    uncapped = _order(s, turns(fair_share_horizon_s=horizon))
    assert uncapped.index("long") == len(shorts)
    cap = 3600.0
    capped = _order(s, turns(fair_share_horizon_s=horizon, short_job_max_penalty_s=cap))
    ahead = capped[: capped.index("long")]
    submit = {t.task_id: t.submit_time for t in shorts}
    assert ahead, "short jobs submitted just after it still pass it (shortest-first within the cap)"
    assert all(submit[t] - start < cap for t in ahead)
    assert len(ahead) < len(shorts)


def test_a_busier_tenants_later_work_never_passes_past_the_cap() -> None:
    # With a horizon, b (more decayed usage) is pushed back further still: its work submitted
    # more than the cap after a's job can never pass it, whatever its length.
    start, shorts, s = _long_behind_shorts([TenantState("a"), TenantState("b", decayed_usage=1e9)])
    cap = 3600.0
    order = _order(s, turns(fair_share_horizon_s=86_400.0, short_job_max_penalty_s=cap))
    ahead = order[: order.index("long")]
    assert all(t.submit_time - start < cap for t in shorts if t.task_id in ahead)
    fair = turns(fair_share_horizon_s=None, short_job_max_penalty_s=cap)
    assert _order(s, fair)[0] == "long"  # strict share order: a is below b, its job goes first


# --- tenant_order: multifactor (slot-preserving tenant order, issue 21) ---------------------------

MULTIFACTOR = SchedulerConfig(tenant_order="multifactor")


def _mixed():
    """_mixed: three tenants with different usage, sizes, lengths and ages, on one busy node."""
    tenants = [TenantState("a", decayed_usage=5e6), TenantState("b", decayed_usage=1e6), TenantState("c")]
    pending = []
    for i in range(8):
        for tenant in "abc":
            runtime = 60.0 * (1 + (7 * i + ord(tenant)) % 13) ** 2  # lengths not in submit order
            pending.append(task(f"{tenant}{i}", tenant, gpus=1 + i % 4, runtime=runtime,
                                submit=NOW - 40_000 + 997 * i + 13 * ord(tenant)))
    return snap([node("n1", gpus=8)], pending, [running("busy", "n1", 8)], tenants)


def _multifactor_order(s, cfg: SchedulerConfig = MULTIFACTOR) -> list:
    """_multifactor_order is the order of the snapshot's tasks under the multifactor tenant order."""
    from meta.policy.ordering import ordered
    from meta.policy.scheduler import SchedulePass
    from meta.policy.slurmlike import multifactor

    return list(ordered(s.pending, SchedulePass(s, cfg).fair, cfg, s.now, priority=multifactor(s)))


def test_each_tenant_gets_the_places_slurms_multifactor_order_gives_it() -> None:
    from meta.policy.slurmlike import SlurmLikeConfig, priorities

    s = _mixed()
    ours = _multifactor_order(s)
    slurm = [t for _, t in priorities(s, SlurmLikeConfig())]
    assert sorted(t.task_id for t in ours) == sorted(t.task_id for t in s.pending)
    assert [t.tenant for t in ours] == [t.tenant for t in slurm]
    assert [t.task_id for t in ours] != [t.task_id for t in slurm], "the case must reorder inside a tenant"


def test_a_tenant_fills_its_places_shortest_first() -> None:
    from meta.policy.ordering import submit_key

    ours = _multifactor_order(_mixed())
    for tenant in "abc":
        keys = [submit_key(t, MULTIFACTOR) for t in ours if t.tenant == tenant]
        assert keys == sorted(keys)


def test_a_light_tenants_job_is_not_passed_by_a_heavy_tenants_short_jobs() -> None:
    from meta.policy.scheduler import schedule

    heavy = [task(f"h{i}", "heavy", runtime=60, submit=NOW - 3600 + i) for i in range(20)]
    light = task("long", "light", runtime=36_000, submit=NOW - 60)
    s = snap(ONE_FREE, [*heavy, light], tenants=[TenantState("heavy", decayed_usage=1e9), TenantState("light")])
    # the shipped turns (horizon 0: borrowers shortest-first) let the heavy tenant's minute jobs go first
    assert [p.task_id for p in schedule(s, turns()).placements] == ["h0"]
    assert [p.task_id for p in schedule(s, MULTIFACTOR).placements] == ["long"]
    assert _multifactor_order(s)[0].task_id == "long"


def test_the_decision_record_names_the_multifactor_place() -> None:
    from meta.policy.scheduler import schedule

    s = snap(ONE_FREE, [task("x", "a", runtime=600), task("y", "b", runtime=60), task("z", "a", runtime=60)],
             tenants=[TenantState("a"), TenantState("b", decayed_usage=1e9)])
    plan = schedule(s, MULTIFACTOR, record=3)
    (placed,) = [d for d in plan.decisions if d.kind == "place"]
    assert placed.task_id == "z"  # a's place (a has no usage), filled by a's shorter job
    assert placed.key.tier == "class" and placed.key.position == 0.0
    rivals = {a.task_id: a for a in placed.alternatives}
    assert [rivals[t].key.position for t in ("x", "y")] == [1.0, 2.0]
    assert "multifactor order (place 0)" in rivals["y"].lost
    assert plan.context.knobs["tenant_order"] == "multifactor"


def test_multifactor_without_its_priority_is_refused() -> None:
    from meta.policy.ordering import ordered

    s = _mixed()
    with pytest.raises(ValueError, match="multifactor"):
        list(ordered(s.pending, None, MULTIFACTOR, s.now))  # type: ignore[arg-type]
