"""The per-job throttle (``--array ...%N``, max_parallel): never more than N of a job's tasks hold capacity."""

from __future__ import annotations

from dataclasses import replace

from hypothesis import given
from hypothesis import strategies as st

from meta.policy.plan import ReasonCode
from meta.policy.scheduler import schedule
from meta.policy.snapshot import PendingTask, Reservation
from tests.policy.builders import node, running, snap, task


def _element(job: str, index: int, limit: int | None) -> PendingTask:
    """_element is one waiting array element of ``job`` (one GPU) with the job's throttle."""
    return replace(task(f"{job}-{index}", gpus=1, max_parallel=limit), job_id=job)


def _live(attempt: str, job: str) -> Reservation:
    """_live is one running element of ``job`` on n1."""
    return replace(running(attempt, "n1", 1), job_id=job)


def test_a_throttle_of_two_places_two_and_says_why_the_rest_wait() -> None:
    pending = [_element("jarr", i, 2) for i in range(6)]
    plan = schedule(snap([node("n1"), node("n2")], pending))
    assert len(plan.placements) == 2
    waiting = {tid: r.code for tid, r in plan.reasons.items()}
    assert len(waiting) == 4 and set(waiting.values()) == {ReasonCode.JOB_ARRAY_TASK_LIMIT}


def test_running_elements_count_against_the_throttle() -> None:
    live = _live("a1", "jarr")
    pending = [_element("jarr", i, 2) for i in range(1, 4)]
    plan = schedule(snap([node("n1")], pending, [live]))
    assert len(plan.placements) == 1


def test_other_jobs_and_unthrottled_jobs_are_not_limited() -> None:
    pending = [_element("jarr", i, 1) for i in range(3)] + [_element("jfree", i, None) for i in range(3)]
    plan = schedule(snap([node("n1")], pending))
    placed_jobs = sorted(p.job_id for p in plan.placements)
    assert placed_jobs == ["jarr", "jfree", "jfree", "jfree"]


@given(limit=st.integers(1, 5), waiting=st.integers(1, 12), live=st.integers(0, 5))
def test_never_more_than_the_limit_hold_capacity(limit: int, waiting: int, live: int) -> None:
    holding = [_live(f"a{i}", "jarr") for i in range(live)]
    pending = [_element("jarr", i, limit) for i in range(waiting)]
    plan = schedule(snap([node("n1"), node("n2")], pending, holding))
    assert len(plan.placements) == min(max(limit - live, 0), waiting)
    assert all(r.code is ReasonCode.JOB_ARRAY_TASK_LIMIT for r in plan.reasons.values())
