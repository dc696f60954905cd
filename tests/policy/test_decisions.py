"""Decisions on record: the plan's decision record matches its placements, preemptions and holds."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given, settings
from hypothesis import strategies as st

from meta.policy.decisions import HOLD, PLACE, PREEMPT, CycleContext, OrderKey, key_for, why_won
from meta.policy.scheduler import schedule
from tests.policy.builders import NOW, JobKind, TenantState, node, running, snap, task, turns

SHARE_ORDER = turns(fair_share_horizon_s=None)
EV = {"cls": "evaluation", "kind": JobKind.EVALUATION, "preemptible": True, "start": NOW - 3600}


def test_winner_key_goes_before_every_rival_it_beat() -> None:
    # one free GPU; tenant a carries usage, so b's later task wins by fair share
    s = snap([node("n1", gpus=1)], [task("ta", "a", submit=NOW - 500), task("tb", "b")],
             tenants=[TenantState("a", decayed_usage=1e6), TenantState("b")])
    plan = schedule(s, SHARE_ORDER, record=3)
    (d,) = plan.decisions
    assert (d.kind, d.task_id, d.tenant) == (PLACE, "tb", "b") and d.detail["nodes"] == ["n1"]
    (alt,) = d.alternatives
    assert alt.task_id == "ta" and alt.tenant == "a"
    assert d.key.order() < alt.key.order() and d.key.share < alt.key.share
    assert alt.lost.startswith("behind in line: lower fair share")
    assert d.key.tier == "class" and d.key.priority_class == "training" and d.key.age_s == 100


def test_record_matches_the_plan_and_is_bounded() -> None:
    pending = [task(f"{t}{i}", t, submit=NOW - 1000 + 10 * i) for t in "abcd" for i in range(30)]
    s = snap([node("n1", gpus=4), node("n2", gpus=2)], pending)
    plan = schedule(s, record=2)
    placed = [d for d in plan.decisions if d.kind == PLACE]
    assert [d.task_id for d in placed] == [p.task_id for p in plan.placements]
    assert len(placed) == 6
    for d in placed:
        assert len(d.alternatives) <= 4  # k ahead that did not fit + k rivals next in line
        assert all(d.key.order() <= a.key.order() for a in d.alternatives if a.lost.startswith("behind"))
    keys = [d.key.order() for d in placed]
    assert keys == sorted(keys)  # winners are recorded in the order they were decided
    assert set(plan.context.tenants) == {"a", "b", "c", "d"} and plan.context.pending == 120


def test_backfill_and_hold_record_who_waits_for_whom() -> None:
    fifo = turns(short_job_weight=0.0)
    two = (node("n0"), node("n1"))
    busy = (running("r0", "n0", 8, end=NOW + 1000), running("r1", "n1", 4, end=NOW + 5000))
    pending = [task("g", gpus=8, workers=2, submit=0.0),
               task("long", runtime=10_000, submit=NOW - 50, kind=JobKind.EVALUATION, gpus=4),
               task("short", runtime=500, submit=NOW - 40, kind=JobKind.EVALUATION, gpus=4)]
    plan = schedule(snap(two, pending, busy), fifo, record=3)
    by_kind = {d.kind: d for d in plan.decisions}
    hold = by_kind[HOLD]
    assert hold.task_id == "g" and hold.detail["planned_start"] == NOW + 5000 and set(hold.detail["nodes"]) == {
        "n0", "n1"}
    kept = [a for a in hold.alternatives if a.task_id == "long"]
    assert kept and "held nodes" in kept[0].lost
    place = by_kind[PLACE]
    assert place.task_id == "short" and place.detail["backfilled"]
    ahead = {a.task_id: a.lost for a in place.alternatives}
    assert ahead["long"] == "ahead in line but did not fit: BlockedByReservation"
    assert why_won(place.key, ahead_key(place, "long")).startswith("backfilled")


def ahead_key(decision, task_id: str) -> OrderKey:
    """ahead_key is the recorded key of one alternative."""
    return next(a.key for a in decision.alternatives if a.task_id == task_id)


def test_preemption_records_victim_and_beneficiary() -> None:
    s = snap((node("n1"), node("n2")), [task("tr", gpus=8)],
             [running("r1", "n1", 8, checkpoint=NOW - 60, **EV), running("r2", "n2", 8, **EV)])
    plan = schedule(s, record=3)
    (d,) = [d for d in plan.decisions if d.kind == PREEMPT]
    assert [p.attempt_id for p in plan.preemptions] == [d.detail["victim_attempt"]] == ["r1"]
    assert d.task_id == "tr" and d.other_job == "jr1" and d.detail["victim_tenant"] == "x"
    assert d.detail["lost_gpu_seconds"] == round(plan.preemptions[0].lost_gpu_seconds, 1)


def test_aged_and_urgent_tiers_explain_themselves() -> None:
    cfg = turns(max_wait_s=3600.0)
    s = snap([node("n1", gpus=1)], [task("old", "a", submit=NOW - 7200), task("new", "b", submit=NOW - 10,
                                                                               deadline=NOW + 4000)])
    plan = schedule(s, cfg, record=3)
    (d,) = plan.decisions
    assert d.task_id == "old" and d.key.tier == "aged"
    (alt,) = [a for a in d.alternatives if a.task_id == "new"] or [None]
    rebuilt = key_for(s.pending[1], cfg, NOW, 0.0, 0.0, None)
    assert rebuilt.tier == "urgent" and "aging bound" in why_won(d.key, rebuilt, cfg)
    assert alt is None or alt.key.tier == "urgent"


def test_context_rebuilds_a_waiting_tasks_key() -> None:
    s = snap([node("n1", gpus=1)], [task("ta", "a", submit=NOW - 500), task("tb", "b")],
             tenants=[TenantState("a", decayed_usage=1e6), TenantState("b")])
    plan = schedule(s, turns(), record=3)
    context = CycleContext.from_json(plan.context.to_json())
    cfg = context.config()
    # the "turns" order (a key from share and submit time alone can be rebuilt; a multifactor place cannot)
    (loser,) = plan.decisions[0].alternatives  # shortest-first merge: a's earlier task wins
    assert (plan.decisions[0].task_id, loser.task_id) == ("ta", "tb")
    tenant = context.tenants["b"]
    rebuilt = key_for(s.pending[1], cfg, NOW, tenant["share"], tenant["usage"], None)
    assert rebuilt == loser.key  # b's share did not change: nothing of b's was placed
    assert "earlier in line" in why_won(plan.decisions[0].key, rebuilt, cfg)
    assert OrderKey.from_json(loser.key.to_json()).order() == loser.key.order()


@settings(max_examples=40, deadline=None)
@given(st.lists(st.tuples(st.sampled_from("abc"), st.integers(1, 8), st.integers(0, 5000)), min_size=1,
                max_size=25))
def test_recording_never_changes_the_plan(specs) -> None:
    pending = [task(f"t{i}", tenant, gpus=g, submit=NOW - age) for i, (tenant, g, age) in enumerate(specs)]
    s = snap([node("n1"), node("n2", gpus=4)], pending, [running("r", "n1", 4, **EV)])
    plain, recorded = schedule(s), schedule(s, record=3)
    assert [(p.task_id, p.shares) for p in plain.placements] == [(p.task_id, p.shares) for p in recorded.placements]
    assert plain.reasons == recorded.reasons and plain.preemptions == recorded.preemptions
    assert not plain.decisions and plain.context is None
    assert {d.task_id for d in recorded.decisions if d.kind == PLACE} == {p.task_id for p in plain.placements}
    assert sum(d.kind == HOLD for d in recorded.decisions) >= len(plain.held) - len(plain.preemptions)
    assert all(len(d.alternatives) <= 3 * 3 for d in recorded.decisions)


def test_labels_are_the_ids_users_see() -> None:
    uuid = "4139acc9-0000-4000-8000-000000000001"
    winner = replace(task("w", "b"), job_id=uuid, job_name="a1b2c3")
    plan = schedule(snap([node("n1", gpus=1)], [winner, task("l", "a", submit=NOW - 1)]), record=2)
    assert plan.decisions[0].label == "a1b2c3" and plan.decisions[0].job_id == uuid


def test_equal_shares_in_share_order_name_the_capped_length_key() -> None:
    # Strict share order, both tenants at share 0: the heads meet by submit + min(10 x runtime, cap),
    # so the later, shorter job wins "earlier in line", not "submitted first".
    cfg = turns(fair_share_horizon_s=None, short_job_max_penalty_s=3600.0)
    long_ = key_for(task("long", "a", runtime=7200, submit=NOW - 600), cfg, NOW, 0.0, 0.0, None)
    short = key_for(task("short", "b", runtime=60, submit=NOW - 300), cfg, NOW, 0.0, 0.0, None)
    assert short.submit_key < long_.submit_key  # 300 s later, but 600 s of length vs the 1 h cap
    why = why_won(short, long_, cfg)
    assert why.startswith("earlier in line by 45 min: submit time + min(10 x runtime, 60 min)")
