"""dependencies decides, from the jobs' observed states, whether a job may be scheduled yet (pure, no I/O).

A job waits before the policy sees it when it is held, its dependency is not satisfied or its
begin time has not come. ``gate`` is evaluated every cycle from what the store observed, so the
daemon and the simulator share it. The semantics are Slurm 22.05's (``test_job_dependency``):

- ``after``: the job started (or ended without starting, e.g. cancelled) ``delay`` ago;
- ``afterany``: the job ended; ``afterok``: it succeeded; ``afternotok``: it ended otherwise
  (failed, timed out, cancelled) — an ended job that cannot satisfy the condition makes it
  never satisfiable;
- ``aftercorr``: for an array element, the element of the same index of the named job succeeded
  (as ``afterok``); where the named job has no such element, the whole job succeeded;
- ``singleton``: no other job of the same name and user is running, or waiting and submitted
  earlier;
- ``,``: every condition (one never satisfiable is enough to doom the dependency); ``?``: any one
  (never satisfiable only when all are).

Precedence of the reasons shown, as Slurm's: a hold, then the dependency, then the begin time.
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass
from enum import StrEnum

from meta.model.dependency import Condition, Dependency, DependencyType
from meta.policy.plan import PendingReason, ReasonCode


class Phase(StrEnum):
    """Phase is how far a job the dependency names has come."""

    WAITING = "waiting"  # no task has started
    STARTED = "started"  # a task runs (or ran) and the job has not ended
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"


ENDED = frozenset({Phase.SUCCEEDED, Phase.FAILED, Phase.CANCELLED})


@dataclass(frozen=True, slots=True)
class ObservedJob:
    """ObservedJob is what the store knows of a job a dependency names (times in epoch seconds)."""

    phase: Phase
    started_at: float | None = None  # its first attempt's start; for a job that ended unstarted, the end
    short_id: str = ""
    ended_at: float | None = None  # when it ended (an ended job)


class Outcome(StrEnum):
    """Outcome is one condition's (or the whole dependency's) state in this cycle."""

    SATISFIED = "satisfied"
    WAITING = "waiting"
    NEVER = "never"


@dataclass(frozen=True, slots=True)
class Gates:
    """Gates are what may keep one job from the policy: hold, dependency, begin time."""

    hold: str | None = None  # "user" | "admin"
    dependency: Dependency | None = None
    begin: float | None = None  # epoch seconds


def element_key(job: str, element: str) -> str:
    """element_key is how an array element of a named job is keyed among the observed jobs (``JOB_3``)."""
    return f"{job}_{element}"


def condition_outcome(
    condition: Condition, jobs: Mapping[str, ObservedJob], now: float, singleton_blocked: bool,
    element: str | None = None,
) -> Outcome:
    """condition_outcome evaluates one condition (for array element ``element``); an unknown job never satisfies it."""
    if condition.type is DependencyType.SINGLETON:
        return Outcome.WAITING if singleton_blocked else Outcome.SATISFIED
    job = jobs.get(condition.job or "")
    if condition.type is DependencyType.AFTER_CORR and element is not None:
        job = jobs.get(element_key(condition.job or "", element), job)
    if job is None:
        return Outcome.NEVER
    if condition.type is DependencyType.AFTER:
        if job.phase is Phase.WAITING:
            return Outcome.WAITING
        ready = (job.started_at or 0.0) + condition.delay_s
        return Outcome.SATISFIED if now >= ready else Outcome.WAITING
    if job.phase not in ENDED:
        return Outcome.WAITING
    if condition.type is DependencyType.AFTER_ANY:
        return Outcome.SATISFIED
    ok = job.phase is Phase.SUCCEEDED
    wanted_ok = condition.type is not DependencyType.AFTER_NOT_OK  # afterok and aftercorr
    return Outcome.SATISFIED if ok == wanted_ok else Outcome.NEVER


def dependency_outcome(
    dependency: Dependency, jobs: Mapping[str, ObservedJob], now: float, singleton_blocked: bool = False,
    element: str | None = None,
) -> Outcome:
    """dependency_outcome folds the conditions: all of them with ``,``, any one with ``?``."""
    outcomes = [condition_outcome(c, jobs, now, singleton_blocked, element) for c in dependency.conditions]
    if dependency.any_of:
        if Outcome.SATISFIED in outcomes:
            return Outcome.SATISFIED
        return Outcome.NEVER if all(o is Outcome.NEVER for o in outcomes) else Outcome.WAITING
    if Outcome.NEVER in outcomes:
        return Outcome.NEVER
    return Outcome.WAITING if Outcome.WAITING in outcomes else Outcome.SATISFIED


def satisfied_since(
    dependency: Dependency, jobs: Mapping[str, ObservedJob], now: float, element: str | None = None
) -> float | None:
    """satisfied_since is when a satisfied dependency became satisfied (None when no time is known).

    Slurm counts a job's age from when it became eligible; the policy's aging does the same with
    this. ``after`` holds from the start (plus its delay), the others from the named job's end; with
    ``,`` the last of them, with ``?`` the first that holds. ``singleton`` has no time of its own.
    """
    times = []
    for condition in dependency.conditions:
        if condition.type is DependencyType.SINGLETON:
            continue
        if condition_outcome(condition, jobs, now, False, element) is not Outcome.SATISFIED:
            continue
        job = jobs.get(condition.job or "")
        if condition.type is DependencyType.AFTER_CORR and element is not None:
            job = jobs.get(element_key(condition.job or "", element), job)
        if job is None:
            continue
        moment = (job.started_at or 0.0) + condition.delay_s if condition.type is DependencyType.AFTER else job.ended_at
        if moment is not None:
            times.append(moment)
    if not times:
        return None
    return min(times) if dependency.any_of else max(times)


def eligible_since(gates: Gates, jobs: Mapping[str, ObservedJob], now: float, element: str | None = None) -> float | None:
    """eligible_since is when an open gated job became eligible: its begin time, its dependency's (the later)."""
    moments = [gates.begin] if gates.begin is not None else []
    if gates.dependency is not None:
        since = satisfied_since(gates.dependency, jobs, now, element)
        if since is not None:
            moments.append(since)
    return max(moments) if moments else None


def gate_changes_at(gates: Gates, jobs: Mapping[str, ObservedJob], now: float,
                    element: str | None = None) -> float | None:
    """gate_changes_at is the next time after ``now`` at which time alone may change ``gate``: a begin time or an ``after+delay``."""
    moments = [gates.begin] if gates.begin is not None else []
    for condition in gates.dependency.conditions if gates.dependency is not None else ():
        job = jobs.get(condition.job or "")
        if condition.type is DependencyType.AFTER and job is not None and job.started_at is not None:
            moments.append(job.started_at + condition.delay_s)
    later = [moment for moment in moments if moment > now]
    return min(later) if later else None


def _named(dependency: Dependency, jobs: Mapping[str, ObservedJob], outcome: Outcome, now: float,
           singleton_blocked: bool, element: str | None) -> str:
    """_named lists the conditions that are in ``outcome`` with the ids users see."""
    shown = []
    for condition in dependency.conditions:
        if condition_outcome(condition, jobs, now, singleton_blocked, element) is outcome:
            job = jobs.get(condition.job or "")
            label = job.short_id if job is not None and job.short_id else condition.job
            shown.append(condition.type.value if label is None else f"{condition.type.value}:{label}")
    return ("?" if dependency.any_of else ",").join(shown)


def gate(
    gates: Gates, jobs: Mapping[str, ObservedJob], now: float, singleton_blocked: bool = False,
    element: str | None = None,
) -> tuple[PendingReason | None, bool]:
    """gate is (the reason the job (its array element ``element``) may not be scheduled now or None, whether its dependency can never hold)."""
    outcome = Outcome.SATISFIED
    if gates.dependency is not None:
        outcome = dependency_outcome(gates.dependency, jobs, now, singleton_blocked, element)
    never = outcome is Outcome.NEVER
    if gates.hold is not None:
        return _held(gates.hold), never
    if gates.dependency is not None and outcome is not Outcome.SATISFIED:
        return _dependency_reason(gates.dependency, jobs, outcome, now, singleton_blocked, element), never
    if gates.begin is not None and now < gates.begin:
        return PendingReason(
            ReasonCode.BEGIN_TIME, "the job's begin time (--begin) has not come",
            remedy="it becomes eligible at its begin time",
        ), False
    return None, False


def _held(hold: str) -> PendingReason:
    if hold == "admin":
        return PendingReason(ReasonCode.JOB_HELD_ADMIN, "held by an administrator",
                             remedy="an administrator runs `metasched release JOB`")
    return PendingReason(ReasonCode.JOB_HELD_USER, "held (--hold or `metasched hold`)",
                         remedy="`metasched release JOB` lets it be scheduled")


def _dependency_reason(dependency: Dependency, jobs: Mapping[str, ObservedJob], outcome: Outcome, now: float,
                       singleton_blocked: bool, element: str | None) -> PendingReason:
    if outcome is Outcome.NEVER:
        failed = _named(dependency, jobs, Outcome.NEVER, now, singleton_blocked, element)
        return PendingReason(
            ReasonCode.DEPENDENCY_NEVER_SATISFIED,
            f"dependency {failed} can never be satisfied",
            remedy="cancel the job (or retry the job it depends on); --kill-on-invalid-dep=yes cancels it",
        )
    waiting = _named(dependency, jobs, Outcome.WAITING, now, singleton_blocked, element)
    return PendingReason(ReasonCode.DEPENDENCY, f"waiting for dependency {waiting}",
                         remedy="it becomes eligible when the jobs it depends on get there")
