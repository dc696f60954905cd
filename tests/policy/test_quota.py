"""Quotas: limits per GPU type and '*', borrowing idle guarantees, reclaiming them by preemption."""

from __future__ import annotations

import pytest

from meta.policy.config import SchedulerConfig
from meta.policy.plan import ReasonCode
from tests.policy.builders import NOW, Case, JobKind, TenantState, node, run_case, running, snap, task

PATIENT = SchedulerConfig(reclaim_patience_s=1800)
SPARING = SchedulerConfig(reclaim_spares_lighter=True)

Q = ReasonCode.WAITING_FOR_QUOTA
MIXED = (node("h1"), node("a1", gpu_type="a100"))

BORROWERS = [running("rb", "h1", 4, tenant="b", preemptible=True, checkpoint=NOW - 60),
             running("rc", "h1", 4, tenant="c", preemptible=True, checkpoint=NOW - 3000)]
HEAVY_C = [TenantState("a", guaranteed={"h100": 4}), TenantState("b"), TenantState("c", decayed_usage=4e7)]

CASES = [
    Case("at its h100 limit waits, a100 still runs",
         snap(MIXED, [task("h", "a"), task("a", "a", gpu_type="a100")], [running("r", "h1", 4, tenant="a")],
              tenants=[TenantState("a", limit={"h100": 4})]),
         want_placed={"a"}, want_waiting={"h": Q}),
    Case("'*' limit counts every type",
         snap(MIXED, [task("a", "a", gpu_type="a100")], [running("r", "h1", 4, tenant="a")],
              tenants=[TenantState("a", limit={"*": 4})]),
         want_waiting={"a": Q}),
    Case("limit counts this cycle's placements",
         snap(MIXED, [task("t1", "a", gpus=4), task("t2", "a", gpus=4, submit=1e5 - 50)],
              tenants=[TenantState("a", limit={"h100": 6})]),
         want_placed={"t1"}, want_waiting={"t2": Q}),
    Case("idle guarantee is lent to others",
         snap([node("h1")], [task("b", "b", gpus=8)],
              tenants=[TenantState("a", guaranteed={"h100": 8}), TenantState("b")]),
         want_placed={"b"}),
    Case("owner below guarantee reclaims from a borrower",
         snap([node("h1")], [task("a", "a", gpus=8, kind=JobKind.EVALUATION)],
              [running("rb", "h1", 8, tenant="b", preemptible=True)],
              tenants=[TenantState("a", guaranteed={"h100": 8}), TenantState("b")]),
         want_waiting={"a": ReasonCode.PREEMPTING}, want_preempted={"rb"}),
    Case("tasks inside their guarantee go before borrowers, even aged ones",
         snap([node("h1")], [task("b", "b", gpus=8, submit=0.0), task("a", "a", gpus=8, kind=JobKind.EVALUATION)],
              tenants=[TenantState("a", guaranteed={"h100": 8}), TenantState("b")]),
         want_placed={"a"}, want_waiting={"b": ReasonCode.HELD_FOR_GANG}),
    Case("no reclaim from a tenant inside its own guarantee",
         snap([node("h1"), node("h2")], [task("a", "a", gpus=8, kind=JobKind.EVALUATION)],
              [running("rb", "h1", 8, tenant="b", preemptible=True), running("rc", "h2", 8, tenant="a")],
              tenants=[TenantState("a", guaranteed={"h100": 16}), TenantState("b", guaranteed={"h100": 8})]),
         want_waiting={"a": ReasonCode.NO_FEASIBLE_NODE}),
    Case("reclaim waits for a borrower that ends within the patience",
         snap([node("h1")], [task("a", "a", gpus=8, kind=JobKind.EVALUATION)],
              [running("rb", "h1", 8, tenant="b", preemptible=True, end=NOW + 600)],
              tenants=[TenantState("a", guaranteed={"h100": 8}), TenantState("b")]),
         want_waiting={"a": ReasonCode.HELD_FOR_GANG}, config=PATIENT),
    Case("reclaim preempts a borrower that would outlast the patience",
         snap([node("h1")], [task("a", "a", gpus=8, kind=JobKind.EVALUATION)],
              [running("rb", "h1", 8, tenant="b", preemptible=True, end=NOW + 7200)],
              tenants=[TenantState("a", guaranteed={"h100": 8}), TenantState("b")]),
         want_waiting={"a": ReasonCode.PREEMPTING}, want_preempted={"rb"}, config=PATIENT),
    Case("a guarantee rounded up to the task reclaims for it",
         snap([node("h1")], [task("a", "a", gpus=8, kind=JobKind.EVALUATION)],
              [running("rb", "h1", 8, tenant="b", preemptible=True)],
              tenants=[TenantState("a", guaranteed={"h100": 4}), TenantState("b")]),
         want_waiting={"a": ReasonCode.PREEMPTING}, want_preempted={"rb"},
         config=SchedulerConfig(guarantee_rounds_up_to_task=True)),
    Case("no guarantee left, nothing to round up",
         snap([node("h1"), node("h2")], [task("a", "a", gpus=8, kind=JobKind.EVALUATION)],
              [running("rb", "h1", 8, tenant="b", preemptible=True), running("ra", "h2", 4, tenant="a")],
              tenants=[TenantState("a", guaranteed={"h100": 4}), TenantState("b")]),
         want_waiting={"a": ReasonCode.NO_FEASIBLE_NODE}, config=SchedulerConfig(guarantee_rounds_up_to_task=True)),
    Case("no reclaim beyond the guarantee",
         snap([node("h1")], [task("a", "a", gpus=8, kind=JobKind.EVALUATION)],
              [running("rb", "h1", 8, tenant="b", preemptible=True)],
              tenants=[TenantState("a", guaranteed={"h100": 4}), TenantState("b")]),
         want_waiting={"a": ReasonCode.NO_FEASIBLE_NODE}, config=SchedulerConfig(guarantee_rounds_up_to_task=False)),
    # issue 21: share = decayed usage / (8 H100 x cost 3 x half-life / ln 2 = 2.1e7) + GPUs held / 8, weights equal
    Case("sparing: a lighter borrower keeps its work",
         snap([node("h1")], [task("a", "a", gpus=8, kind=JobKind.EVALUATION)],
              [running("rb", "h1", 8, tenant="b", preemptible=True)],
              tenants=[TenantState("a", guaranteed={"h100": 8}, decayed_usage=5e7), TenantState("b")]),  # 2.4 > 1
         want_waiting={"a": ReasonCode.NO_FEASIBLE_NODE}, config=SPARING),
    Case("sparing: a heavier borrower is reclaimed from",
         snap([node("h1")], [task("a", "a", gpus=8, kind=JobKind.EVALUATION)],
              [running("rb", "h1", 8, tenant="b", preemptible=True)],
              tenants=[TenantState("a", guaranteed={"h100": 8}), TenantState("b", decayed_usage=5e6)]),  # 0 < 1.24
         want_waiting={"a": ReasonCode.PREEMPTING}, want_preempted={"rb"}, config=SPARING),
    Case("sparing: the lighter borrower's neighbour on the node is taken instead",
         snap([node("h1")], [task("a", "a", gpus=4, kind=JobKind.EVALUATION)],
              [running("rb", "h1", 4, tenant="b", preemptible=True),
               running("rc", "h1", 4, tenant="c", preemptible=True, checkpoint=NOW - 3000)],
              tenants=[TenantState("a", guaranteed={"h100": 4}, decayed_usage=2e7), TenantState("b"),
                       TenantState("c", decayed_usage=4e7)]),  # b 0.5 < a 0.96 < c 2.4
         want_waiting={"a": ReasonCode.PREEMPTING}, want_preempted={"rc"}, config=SPARING),
    # b's job has the least lost work (a recent checkpoint), c is the heavier borrower
    Case("least lost work: the light borrower's job goes",
         snap([node("h1")], [task("a", "a", gpus=4, kind=JobKind.EVALUATION)], BORROWERS, tenants=HEAVY_C),
         want_waiting={"a": ReasonCode.PREEMPTING}, want_preempted={"rb"}),
    Case("heaviest first: the heavier borrower's job goes",
         snap([node("h1")], [task("a", "a", gpus=4, kind=JobKind.EVALUATION)], BORROWERS, tenants=HEAVY_C),
         want_waiting={"a": ReasonCode.PREEMPTING}, want_preempted={"rc"},
         config=SchedulerConfig(reclaim_victims="heaviest")),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_quota(case: Case) -> None:
    run_case(case)


def test_quota_message_and_remedy() -> None:
    plan = run_case(CASES[0])
    reason = plan.reasons["h"]
    assert "uses 4 of its 4 h100 GPUs limit" in reason.message
    assert reason.remedy.startswith("raising a's h100 GPUs limit to 5 would start it now"), reason
    assert "a's running jobs free 1 h100 GPU" in reason.remedy
