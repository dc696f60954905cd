"""Wake (meta/policy/wake.py) and gate_changes_at: the moments time alone changes the plan, so a resting daemon wakes then."""

from __future__ import annotations

from meta.model.dependency import parse_dependency
from meta.policy.config import SchedulerConfig
from meta.policy.dependencies import Gates, ObservedJob, Phase, gate, gate_changes_at
from meta.policy.ordering import is_aged, is_urgent
from meta.policy.wake import next_wake
from tests.policy.builders import NOW, task

CFG = SchedulerConfig(max_wait_s=1000.0, deadline_urgency_s=600.0)


def test_the_next_wake_is_the_first_task_to_turn_aged_or_urgent() -> None:
    old = task("old", submit=NOW - 990)  # aged at NOW + 10
    urgent = task("due", submit=NOW, runtime=100, deadline=NOW + 705)  # urgent at NOW + 5
    assert next_wake([old], NOW, CFG) == NOW + 10
    assert next_wake([old, urgent], NOW, CFG) == NOW + 5
    assert next_wake([urgent], NOW + 5, CFG) == NOW + 705  # then late, at its deadline
    for moment, who in ((NOW + 10, old), (NOW + 5, urgent)):
        turned = is_aged if who is old else is_urgent
        assert not turned(who, moment - 0.001, CFG) and turned(who, moment, CFG)


def test_moments_already_past_do_not_wake() -> None:
    aged = task("aged", submit=NOW - 5000)
    assert next_wake([aged], NOW, CFG) is None
    assert next_wake([], NOW, CFG) is None


def test_a_gate_changes_at_its_begin_time_and_at_an_after_delay() -> None:
    begin = Gates(begin=NOW + 30)
    assert gate_changes_at(begin, {}, NOW) == NOW + 30
    assert gate(begin, {}, NOW + 29.9)[0] is not None and gate(begin, {}, NOW + 30)[0] is None
    assert gate_changes_at(begin, {}, NOW + 31) is None
    delayed = Gates(dependency=parse_dependency("after:j4k9x2m7+2"))  # 2 minutes after that job started
    jobs = {"j4k9x2m7": ObservedJob(Phase.STARTED, started_at=NOW - 60)}
    assert gate_changes_at(delayed, jobs, NOW) == NOW + 60
    assert gate(delayed, jobs, NOW + 59.9)[0] is not None and gate(delayed, jobs, NOW + 60)[0] is None
    assert gate_changes_at(delayed, {"j4k9x2m7": ObservedJob(Phase.WAITING)}, NOW) is None
