"""The dependency gate (meta/policy/dependencies.py): every type against every phase, ',' and '?', delays, singleton, precedence."""

from __future__ import annotations

import pytest

from meta.model.dependency import parse_dependency
from meta.policy.dependencies import (
    Gates,
    ObservedJob,
    Outcome,
    Phase,
    condition_outcome,
    dependency_outcome,
    element_key,
    eligible_since,
    gate,
    satisfied_since,
)
from meta.policy.plan import ReasonCode

A, B = "jaaaaaaaa", "jbbbbbbbb"
NOW = 10_000.0
S, W, N = Outcome.SATISFIED, Outcome.WAITING, Outcome.NEVER

# Slurm 22.05 test_job_dependency: what each type makes of each phase of the job it names
TABLE = {
    #             waiting started succeeded failed cancelled
    "after":      (W,      S,      S,        S,     S),
    "afterany":   (W,      W,      S,        S,     S),
    "afterok":    (W,      W,      S,        N,     N),
    "afternotok": (W,      W,      N,        S,     S),
}  # fmt: skip
PHASES = (Phase.WAITING, Phase.STARTED, Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED)


def job(phase: Phase, started_at: float | None = 5_000.0) -> ObservedJob:
    return ObservedJob(phase, None if phase is Phase.WAITING else started_at, short_id="j-shown")


@pytest.mark.parametrize("kind", sorted(TABLE))
@pytest.mark.parametrize("index", range(len(PHASES)))
def test_each_type_against_each_phase(kind: str, index: int) -> None:
    (condition,) = parse_dependency(f"{kind}:{A}").conditions
    assert condition_outcome(condition, {A: job(PHASES[index])}, NOW, False) is TABLE[kind][index]


@pytest.mark.parametrize("kind", sorted(TABLE))
def test_a_job_the_store_does_not_know_never_satisfies(kind: str) -> None:
    assert dependency_outcome(parse_dependency(f"{kind}:{A}"), {}, NOW) is N


def test_after_with_a_delay_counts_minutes_from_the_start() -> None:
    dep = parse_dependency(f"after:{A}+10")
    assert dependency_outcome(dep, {A: job(Phase.STARTED, started_at=NOW - 599)}, NOW) is W
    assert dependency_outcome(dep, {A: job(Phase.STARTED, started_at=NOW - 600)}, NOW) is S
    # a job cancelled before it started counts from its end (what the store passes as started_at)
    assert dependency_outcome(dep, {A: job(Phase.CANCELLED, started_at=NOW - 30)}, NOW) is W


@pytest.mark.parametrize(
    ("a", "b", "all_of", "any_of"),
    [
        (Phase.SUCCEEDED, Phase.SUCCEEDED, S, S),
        (Phase.SUCCEEDED, Phase.STARTED, W, S),
        (Phase.SUCCEEDED, Phase.FAILED, N, S),
        (Phase.STARTED, Phase.FAILED, N, W),
        (Phase.FAILED, Phase.CANCELLED, N, N),
        (Phase.WAITING, Phase.WAITING, W, W),
    ],
)
def test_comma_needs_all_and_question_mark_any(a: Phase, b: Phase, all_of: Outcome, any_of: Outcome) -> None:
    jobs = {A: job(a), B: job(b)}
    assert dependency_outcome(parse_dependency(f"afterok:{A}:{B}"), jobs, NOW) is all_of
    assert dependency_outcome(parse_dependency(f"afterok:{A},afterok:{B}"), jobs, NOW) is all_of
    assert dependency_outcome(parse_dependency(f"afterok:{A}?afterok:{B}"), jobs, NOW) is any_of


@pytest.mark.parametrize(("phase", "want"), [(Phase.WAITING, W), (Phase.STARTED, W), (Phase.SUCCEEDED, S),
                                             (Phase.FAILED, N), (Phase.CANCELLED, N)])  # fmt: skip
def test_aftercorr_follows_the_same_index_element_else_the_whole_job(phase: Phase, want: Outcome) -> None:
    dep = parse_dependency(f"aftercorr:{A}")
    whole = {A: job(Phase.STARTED)}
    assert dependency_outcome(dep, {**whole, element_key(A, "3"): job(phase)}, NOW, element="3") is want
    assert dependency_outcome(dep, {**whole, element_key(A, "4"): job(phase)}, NOW, element="3") is W  # no element 3
    assert dependency_outcome(dep, {A: job(phase)}, NOW, element="3") is want
    assert dependency_outcome(dep, {A: job(phase)}, NOW) is want  # not an array element: the whole job


def test_mixed_types_in_one_dependency() -> None:
    dep = parse_dependency(f"afterok:{A},afternotok:{B}")
    assert dependency_outcome(dep, {A: job(Phase.SUCCEEDED), B: job(Phase.FAILED)}, NOW) is S
    assert dependency_outcome(dep, {A: job(Phase.SUCCEEDED), B: job(Phase.SUCCEEDED)}, NOW) is N
    either = parse_dependency(f"afternotok:{A}?afterany:{B}")
    assert dependency_outcome(either, {A: job(Phase.SUCCEEDED), B: job(Phase.STARTED)}, NOW) is W
    assert dependency_outcome(either, {A: job(Phase.SUCCEEDED), B: job(Phase.CANCELLED)}, NOW) is S


def test_singleton_waits_while_blocked_and_combines() -> None:
    alone = parse_dependency("singleton")
    assert dependency_outcome(alone, {}, NOW, singleton_blocked=True) is W
    assert dependency_outcome(alone, {}, NOW, singleton_blocked=False) is S
    both = parse_dependency(f"singleton,afterok:{A}")
    assert dependency_outcome(both, {A: job(Phase.SUCCEEDED)}, NOW, singleton_blocked=True) is W
    assert dependency_outcome(both, {A: job(Phase.FAILED)}, NOW, singleton_blocked=True) is N


def test_gate_reasons_and_their_precedence() -> None:
    dep = parse_dependency(f"afterok:{A}")
    waiting, failed = {A: job(Phase.STARTED)}, {A: job(Phase.FAILED)}
    assert gate(Gates(), {}, NOW) == (None, False)
    reason, never = gate(Gates(dependency=dep), waiting, NOW)
    assert reason is not None and reason.code is ReasonCode.DEPENDENCY and not never
    assert "afterok:j-shown" in reason.message  # the id users see
    reason, never = gate(Gates(dependency=dep), failed, NOW)
    assert reason is not None and reason.code is ReasonCode.DEPENDENCY_NEVER_SATISFIED and never
    # a hold shows before the dependency (whose doom is still reported), the dependency before the begin time
    reason, never = gate(Gates(hold="user", dependency=dep, begin=NOW + 60), failed, NOW)
    assert reason is not None and reason.code is ReasonCode.JOB_HELD_USER and never
    reason, _ = gate(Gates(hold="admin"), {}, NOW)
    assert reason is not None and reason.code is ReasonCode.JOB_HELD_ADMIN
    reason, _ = gate(Gates(dependency=dep, begin=NOW + 60), waiting, NOW)
    assert reason is not None and reason.code is ReasonCode.DEPENDENCY
    reason, _ = gate(Gates(dependency=dep, begin=NOW + 60), {A: job(Phase.SUCCEEDED)}, NOW)
    assert reason is not None and reason.code is ReasonCode.BEGIN_TIME
    assert gate(Gates(dependency=dep, begin=NOW), {A: job(Phase.SUCCEEDED)}, NOW) == (None, False)


def test_eligibility_counts_from_when_the_dependency_held_and_the_begin_time() -> None:
    ended_a = ObservedJob(Phase.SUCCEEDED, 100.0, "a", ended_at=500.0)
    ended_b = ObservedJob(Phase.FAILED, 200.0, "b", ended_at=900.0)
    jobs = {A: ended_a, B: ended_b}
    assert satisfied_since(parse_dependency(f"afterany:{A}:{B}"), jobs, NOW) == 900.0  # ',': the last
    assert satisfied_since(parse_dependency(f"afterok:{A}?afternotok:{B}"), jobs, NOW) == 500.0  # '?': the first
    assert satisfied_since(parse_dependency(f"afterok:{A}?afterok:{B}"), jobs, NOW) == 500.0  # b never holds
    assert satisfied_since(parse_dependency(f"after:{A}+2"), jobs, NOW) == 220.0
    assert satisfied_since(parse_dependency("singleton"), {}, NOW) is None
    gates = Gates(dependency=parse_dependency(f"afterany:{A}"), begin=700.0)
    assert eligible_since(gates, jobs, NOW) == 700.0
    assert eligible_since(Gates(begin=300.0), {}, NOW) == 300.0 and eligible_since(Gates(), {}, NOW) is None
