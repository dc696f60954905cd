"""Preemption: only for a reason, least lost work first, whole gangs, no more than needed."""

from __future__ import annotations

import pytest

from meta.policy.plan import ReasonCode
from tests.policy.builders import NOW, Case, JobKind, node, run_case, running, snap, task

EV = {"cls": "evaluation", "kind": JobKind.EVALUATION, "preemptible": True, "start": NOW - 3600}
TWO = (node("n1"), node("n2"))
P = ReasonCode.PREEMPTING

CASES = [
    Case("picks the least lost work",
         snap(TWO, [task("tr", gpus=8)], [running("r1", "n1", 8, checkpoint=NOW - 60, **EV),
                                           running("r2", "n2", 8, **EV)]),
         want_waiting={"tr": P}, want_preempted={"r1"}),
    Case("restore cost counts as lost work",
         snap(TWO, [task("tr", gpus=8)], [running("r1", "n1", 8, checkpoint=NOW - 60, restore=1000, **EV),
                                           running("r2", "n2", 8, checkpoint=NOW - 600, **EV)]),
         want_waiting={"tr": P}, want_preempted={"r2"}),
    Case("minimum runtime protects fresh work",
         snap(TWO, [task("tr", gpus=8)], [running("r1", "n1", 8, min_runtime=7200, checkpoint=NOW - 1, **EV),
                                           running("r2", "n2", 8, **EV)]),
         want_waiting={"tr": P}, want_preempted={"r2"}),
    Case("non-preemptible work is never evicted",
         snap(TWO, [task("tr", gpus=8)], [running("r1", "n1", 8, cls="evaluation"),
                                           running("r2", "n2", 8, cls="evaluation")]),
         want_waiting={"tr": ReasonCode.NO_FEASIBLE_NODE}),
    Case("same class is no reason",
         snap(TWO, [task("tr", gpus=8)], [running("r1", "n1", 8, preemptible=True),
                                           running("r2", "n2", 8, preemptible=True)]),
         want_waiting={"tr": ReasonCode.NO_FEASIBLE_NODE}),
    Case("drops victims that turn out unnecessary",
         snap(TWO, [task("tr", gpus=8)], [running("r1", "n1", 2, checkpoint=NOW - 1, **EV), running("x", "n1", 6),
                                           running("r2", "n2", 8, checkpoint=NOW - 100, **EV)]),
         want_waiting={"tr": P}, want_preempted={"r2"}),
    Case("evicts a whole gang reservation",
         snap(TWO, [task("tr", gpus=8)], [running("g", "n1", 8, extra_nodes=("n2",), **EV)]),
         want_waiting={"tr": P}, want_preempted={"g"}),
    Case("endangered deadline may preempt its own class",
         snap(TWO, [task("tr", gpus=8, deadline=NOW + 3700)],
              [running("r1", "n1", 8, preemptible=True), running("r2", "n2", 8, preemptible=True)]),
         want_waiting={"tr": P}, want_preempted={"r1"}),
    Case("a distant deadline does not preempt",
         snap(TWO, [task("tr", gpus=8, deadline=NOW + 90_000)],
              [running("r1", "n1", 8, preemptible=True), running("r2", "n2", 8, preemptible=True)]),
         want_waiting={"tr": ReasonCode.NO_FEASIBLE_NODE}),
    Case("freed capacity is kept for the beneficiary",
         snap([node("n1")], [task("tr", "a", gpus=8), task("ev", "b", gpus=2, kind=JobKind.EVALUATION, runtime=60)],
              [running("r1", "n1", 4, **EV)]),
         want_waiting={"tr": P, "ev": ReasonCode.BLOCKED_BY_RESERVATION}, want_preempted={"r1"}),
]


@pytest.mark.parametrize("case", CASES, ids=lambda c: c.name)
def test_preemption(case: Case) -> None:
    run_case(case)


def test_preemption_records_cost_and_beneficiary() -> None:
    plan = run_case(CASES[0])
    (p,) = plan.preemptions
    assert p.for_task == "tr" and p.lost_gpu_seconds == pytest.approx(8 * 60)
    assert "higher priority" in p.reason
    assert plan.held[0].task_id == "tr" and plan.held[0].nodes == ("n1",)


def test_stopping_victims_are_not_preempted_again() -> None:
    """Next cycle the victim is still stopping: the beneficiary waits for it, nobody else is evicted."""
    plan = run_case(Case(
        "stopping", snap(TWO, [task("tr", gpus=8)], [
            running("r1", "n1", 8, checkpoint=NOW - 60, stopping=True, **EV),
            running("r2", "n2", 8, **EV),
        ]), want_waiting={"tr": P}))
    assert plan.held[0].nodes == ("n1",)
