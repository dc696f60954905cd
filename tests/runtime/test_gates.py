"""The cycle's gates (meta/cycle/snapshot/gates.py) over a real store: observed phases, singleton, holds, begin times, kill-on-invalid-dep."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

from sqlalchemy import select

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.snapshot.build import SpecCache, build_snapshot
from meta.cycle.snapshot.gates import apply_gates, observe_jobs, singleton_blocked
from meta.model.durations import utcnow
from meta.model.kinds import FailureCategory
from meta.model.states import AttemptState, TaskState
from meta.policy.dependencies import Phase
from meta.policy.plan import ReasonCode
from meta.service.api import Service
from meta.store.lifecycle import attempt_event
from meta.store.models import AuditEvent, Job, Task, TaskReason
from slurm_bridge.fake import FakeSlurm
from tests.runtime.support import node_state, place, submit, training

ONE_TRY = {"max_attempts": 1}


def short(service: Service, job_id: str) -> str:
    with service.db.session() as session:
        return session.scalar(select(Job.short_id).where(Job.id == job_id)) or ""


def finish(service: Service, task_id: str, ok: bool) -> None:
    """finish runs a task's attempt and ends it: succeeded, or failed by the user's code (no retry left)."""
    if ok:
        place(service.db, task_id, state=AttemptState.SUCCEEDED)
        return
    attempt_id = place(service.db, task_id, state=AttemptState.RUNNING)
    with service.db.session() as session:
        attempt_event(session, attempt_id, AttemptState.FAILED, f"test:fail:{attempt_id}", actor="test",
                      failure_category=FailureCategory.USER_ERROR, values={"exit_code": 1})  # fmt: skip


def gates_now(service: Service, kill_default: bool = False, moment_s: float = 0.0):  # noqa: ANN201
    specs = SpecCache()
    moment = utcnow() + timedelta(seconds=moment_s)
    with service.db.session() as session:
        snapshot = build_snapshot(session, [node_state("node1")], specs, now=moment)
        return apply_gates(session, snapshot.pending, specs, moment, kill_default)


def codes(result, task_ids: list[str]) -> list[str | None]:  # noqa: ANN001
    return [result.reasons[t].code.value if t in result.reasons else None for t in task_ids]


def test_observed_phases_follow_the_jobs(service: Service) -> None:
    waiting, (t_waiting,) = submit(service, training("w"))
    started, (t_started,) = submit(service, training("s"))
    ok, (t_ok,) = submit(service, training("ok"))
    failed, (t_failed,) = submit(service, training("f", retry=ONE_TRY))
    cancelled, _ = submit(service, training("c"))
    place(service.db, t_started, state=AttemptState.RUNNING)
    finish(service, t_ok, True)
    finish(service, t_failed, False)
    service.cancel(cancelled)
    with service.db.session() as session:
        seen = observe_jobs(session, [waiting, started, short(service, ok), failed, cancelled])
    assert seen[waiting].phase is Phase.WAITING and seen[waiting].started_at is None
    assert seen[started].phase is Phase.STARTED and seen[started].started_at is not None
    assert seen[short(service, ok)].phase is Phase.SUCCEEDED and seen[ok].short_id == short(service, ok)
    assert seen[failed].phase is Phase.FAILED
    # cancelled before it started: "after" counts from the cancel
    assert seen[cancelled].phase is Phase.CANCELLED and seen[cancelled].started_at is not None


def test_a_chain_opens_step_by_step_and_a_doomed_dependency_is_cancelled_only_when_asked(service: Service) -> None:
    a, (ta,) = submit(service, training("a", retry=ONE_TRY))
    b, (tb,) = submit(service, training("b", dependency=f"afterok:{short(service, a)}"))
    c, (tc,) = submit(service, training("c", dependency=f"afterany:{b}"))
    d, (td,) = submit(service, training("d", dependency=f"afternotok:{short(service, a)}"))
    e, (te,) = submit(service, training("e", dependency=f"afternotok:{short(service, a)}", kill_on_invalid_dep=True))
    result = gates_now(service)
    assert [t.task_id for t in result.open] == [ta]
    assert codes(result, [tb, tc, td, te]) == ["Dependency"] * 4
    finish(service, ta, True)
    result = gates_now(service)
    assert [t.task_id for t in result.open] == [tb]
    with service.db.session() as session:
        a_ended = session.scalar(select(Task.updated_at).where(Task.id == ta))
    assert a_ended is not None and result.open[0].submit_time == a_ended.timestamp()  # age from eligibility
    assert codes(result, [tc, td, te]) == ["Dependency", "DependencyNeverSatisfied", "DependencyNeverSatisfied"]
    assert sorted(result.doomed) == [e]  # the site default (no) keeps d waiting
    assert "afternotok:" + short(service, a) in result.reasons[td].message
    assert sorted(gates_now(service, kill_default=True).doomed) == sorted([d, e])
    finish(service, tb, False)
    assert [t.task_id for t in gates_now(service).open] == [tc]  # afterany: b ended, even failed


def test_singleton_lets_one_job_of_a_name_and_user_run_at_a_time(service: Service) -> None:
    first, (t1,) = submit(service, training("solo", dependency="singleton"))
    second, (t2,) = submit(service, training("solo", dependency="singleton"))
    other_name, (t3,) = submit(service, training("other", dependency="singleton"))
    other_tenant, (t4,) = submit(service, training("solo", tenant="beta", dependency="singleton"))
    with service.db.session() as session:
        # jobs without an owner (the service's admin here) are told apart by who submitted them
        session.get(Job, other_tenant).submitted_by = "someone-else"  # type: ignore[union-attr]
        assert singleton_blocked(session, [first, second, other_name, other_tenant]) == {second}
    place(service.db, t1, state=AttemptState.RUNNING)
    result = gates_now(service)
    assert codes(result, [t2]) == ["Dependency"] and {t.task_id for t in result.open} == {t3, t4}
    finish_attempt_of(service, t1)
    assert t2 in {t.task_id for t in gates_now(service).open}


def finish_attempt_of(service: Service, task_id: str) -> None:
    with service.db.session() as session:
        task = session.get(Task, task_id)
        assert task is not None
        (attempt,) = task.attempts
        attempt_event(session, attempt.id, AttemptState.SUCCEEDED, f"test:done:{attempt.id}", actor="test")


def test_holds_and_begin_times(service: Service) -> None:
    held, (th,) = submit(service, training("h", hold=True))
    later, (tl,) = submit(service, training("l", begin=(utcnow() + timedelta(minutes=5)).isoformat()))
    result = gates_now(service)
    # submitted held by the service's default caller, an admin: an admin's hold, as under Slurm
    assert codes(result, [th, tl]) == ["JobHeldAdmin", "BeginTime"] and result.open == []
    assert [t.task_id for t in gates_now(service, moment_s=301).open] == [tl]
    service.release(short(service, held))
    assert th in {t.task_id for t in gates_now(service).open}


def test_the_daemon_stores_gate_reasons_and_cancels_doomed_jobs(service: Service, tmp_path: Path) -> None:
    failed, (tf,) = submit(service, training("a", retry=ONE_TRY))
    finish(service, tf, False)
    doomed, (td,) = submit(service, training("b", dependency=f"afterok:{failed}", kill_on_invalid_dep=True))
    waiting, (tw,) = submit(service, training("c", dependency=f"afterok:{failed}"))
    held, (th,) = submit(service, training("d", hold=True))
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder="gates", submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=30))  # fmt: skip
    daemon = Daemon(service.db, FakeSlurm(), config)
    report = daemon.period()
    assert report.error == "" and report.placed == 0
    with service.db.session() as session:
        reasons = dict(session.execute(select(TaskReason.task_id, TaskReason.code)).all())
        states = dict(session.execute(select(Task.id, Task.state)).all())
        audit = session.scalars(select(AuditEvent).where(AuditEvent.action == "job.cancel")).all()
    assert reasons[tw] == ReasonCode.DEPENDENCY_NEVER_SATISFIED.value and reasons[th] == "JobHeldAdmin"
    assert states[td] == TaskState.CANCELLED.value and states[tw] == states[th] == TaskState.PENDING.value
    assert [(e.actor, e.subject) for e in audit] == [("scheduler", short(service, doomed))]
    assert "DependencyNeverSatisfied" in audit[0].detail["reason"]


def test_aftercorr_gates_each_array_element_on_the_same_index(service: Service, tmp_path: Path) -> None:
    first, (f0, f1, f2) = submit(service, training("x", retry=ONE_TRY, array={"indexes": [0, 1, 2]}))
    then, (t0, t1, t2, t3) = submit(service, training("y", array={"indexes": [0, 1, 2, 3]}, kill_on_invalid_dep=True,
                                                      dependency=f"aftercorr:{short(service, first)}"))  # fmt: skip
    finish(service, f0, True)
    finish(service, f1, False)
    place(service.db, f2, state=AttemptState.RUNNING)
    result = gates_now(service)
    assert t0 in {t.task_id for t in result.open}
    # element 1 failed: never; element 2 runs; element 3 has no counterpart: the whole job, still running
    assert codes(result, [t1, t2, t3]) == ["DependencyNeverSatisfied", "Dependency", "Dependency"]
    assert list(result.doomed_tasks) == [t1] and result.doomed == {}
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder="corr", submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=30))  # fmt: skip
    assert Daemon(service.db, FakeSlurm(), config).period().error == ""
    with service.db.session() as session:
        states = dict(session.execute(select(Task.id, Task.state).where(Task.job_id == then)).all())
        audit = [e.subject for e in session.scalars(select(AuditEvent).where(AuditEvent.action == "job.cancel"))]
    assert states[t1] == TaskState.CANCELLED.value and states[t2] == states[t3] == TaskState.PENDING.value
    assert audit == [f"{short(service, then)}_1"]
