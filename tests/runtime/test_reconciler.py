"""Reconciler with FakeSlurm: follow Slurm states, look up unknown launches, lose, orphans, duplicates."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest

from meta.cycle.lease import Leadership
from meta.cycle.reconcile import Observation, Reconciler, ReconcileSettings, Sighting, observe
from meta.model.durations import utcnow
from meta.model.states import AttemptState, TaskState
from meta.service.api import Service
from meta.store.lifecycle import create_attempt
from meta.store.models import Attempt
from meta.store.site import ensure_site_id
from slurm_bridge import tags
from slurm_bridge.errors import SlurmTransient
from slurm_bridge.fake import FakeSlurm
from slurm_bridge.states import map_state
from tests.runtime.support import (
    attempt,
    attempts_of,
    checkpointing,
    lead,
    place,
    share,
    submit,
    task,
    training,
)

SETTINGS = ReconcileSettings(unknown_window_s=15.0, lost_grace_s=120.0, lease_s=300.0)


def _tagged(fake: FakeSlurm, attempt_id: str, token: int = 1, state: str = "RUNNING", nodes=("node1",)):
    return fake.add_job(f"ms-{attempt_id}", f"metasched:attempt={attempt_id}:token={token}", state, nodes)


def _reconcile(service: Service, fake: FakeSlurm, leadership: Leadership, later_s: float = 0.0):
    reconciler = Reconciler(service.db, fake, SETTINGS)
    observation = observe(fake, reconciler.since(), site=reconciler.site)
    if later_s:
        observation = dataclasses.replace(observation, at=observation.at + timedelta(seconds=later_s))
    return reconciler.apply(observation, leadership), observation


def _launched(service: Service, fake: FakeSlurm, spec=None, state: str = "RUNNING", nodes=("node1",)):
    """_launched is a launching attempt whose Slurm job exists, with its id recorded."""
    _, (t,) = submit(service, spec or training())
    attempt_id = place(service.db, t, [share(n) for n in nodes], AttemptState.LAUNCHING)
    job = _tagged(fake, attempt_id, state=state, nodes=nodes)
    with service.db.session() as session:
        session.get(Attempt, attempt_id).slurm_job_id = str(job.job_id)
    return t, attempt_id, job


def _assert_succeeded(service: Service, task_id: str, attempt_id: str) -> None:
    """_assert_succeeded: the attempt ended with exit 0 and its task succeeded."""
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.SUCCEEDED.value and row.exit_code == 0 and row.ended_at is not None
    assert task(service.db, task_id).state == TaskState.SUCCEEDED.value


def test_running_in_squeue_moves_launching_to_running_and_renews(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, attempt_id, _ = _launched(service, fake)
    result, observation = _reconcile(service, fake, leadership)
    row = attempt(service.db, attempt_id)
    assert result.transitions == 1
    assert row.state == AttemptState.RUNNING.value and row.started_at is not None
    assert row.last_seen_at == observation.at
    assert row.lease_expires_at == observation.at + timedelta(seconds=SETTINGS.lease_s)
    assert task(service.db, t).state == TaskState.RUNNING.value


def test_pending_in_squeue_keeps_launching(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, attempt_id, _ = _launched(service, fake, state="PENDING")
    result, observation = _reconcile(service, fake, leadership)
    row = attempt(service.db, attempt_id)
    assert result.transitions == 0 and row.state == AttemptState.LAUNCHING.value
    assert row.last_seen_at == observation.at


@pytest.mark.parametrize("in_squeue", [True, False], ids=["squeue", "sacct-only"])
def test_completed_moves_to_succeeded(service: Service, in_squeue: bool) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, attempt_id, job = _launched(service, fake)
    fake.finish(job.job_id, "COMPLETED", 0)
    job.in_squeue = in_squeue
    _reconcile(service, fake, leadership)
    _assert_succeeded(service, t, attempt_id)


def test_failed_exit_3_is_a_user_error_and_retries_by_policy(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    spec = training(retry={"on": ["user_error"], "max_attempts": 3, "backoff": 0})
    t, attempt_id, job = _launched(service, fake, spec)
    fake.finish(job.job_id, "FAILED", 3)
    _reconcile(service, fake, leadership)
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.FAILED.value
    assert row.failure_category == "user_error" and row.exit_code == 3
    assert task(service.db, t).state == TaskState.PENDING.value
    with service.db.session() as session:
        retry = create_attempt(session, t, "test:retry", placement=[share("node2")])
        assert (retry.number, retry.fencing_token) == (2, 2)


def test_failed_exit_3_fails_the_task_under_the_default_policy(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, _, job = _launched(service, fake)
    fake.finish(job.job_id, "FAILED", 3)
    _reconcile(service, fake, leadership)
    assert task(service.db, t).state == TaskState.FAILED.value


def test_cancelled_after_a_preempt_stop_is_preempted(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, (t,) = submit(service, checkpointing())
    job = fake.add_job("placeholder")
    attempt_id = place(service.db, t, state=AttemptState.STOPPING, stop_reason="preempt", slurm_job_id=str(job.job_id))
    job.name, job.comment = f"ms-{attempt_id}", f"metasched:attempt={attempt_id}:token=1"
    fake.cancel([job.job_id])
    _reconcile(service, fake, leadership)
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.PREEMPTED.value and row.failure_category == "preempted"
    assert task(service.db, t).state == TaskState.PENDING.value


def test_cancelled_after_a_user_cancel_is_cancelled(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, attempt_id, job = _launched(service, fake)
    service.cancel(task(service.db, t).job_id)
    fake.cancel([job.job_id])
    _reconcile(service, fake, leadership)
    assert attempt(service.db, attempt_id).state == AttemptState.CANCELLED.value
    assert task(service.db, t).state == TaskState.CANCELLED.value


def test_node_fail_is_a_node_failure_and_avoids_the_nodes(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, attempt_id, job = _launched(service, fake, training(workers=2), nodes=("node2", "node3"))
    fake.finish(job.job_id, "NODE_FAIL", 0)
    _reconcile(service, fake, leadership)
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.FAILED.value and row.failure_category == "node_failure"
    retried = task(service.db, t)
    assert retried.state == TaskState.PENDING.value
    assert retried.avoid_nodes == ["node2", "node3"]


@pytest.mark.parametrize(
    ("slurm_state", "want"), [("PENDING", AttemptState.LAUNCHING), ("RUNNING", AttemptState.RUNNING)]
)
def test_unknown_launch_found_in_squeue_records_the_slurm_id(
    service: Service, slurm_state: str, want: AttemptState
) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, (t,) = submit(service, training())
    attempt_id = place(service.db, t, state=AttemptState.LAUNCH_UNKNOWN)
    job = _tagged(fake, attempt_id, state=slurm_state)
    result, _ = _reconcile(service, fake, leadership)
    row = attempt(service.db, attempt_id)
    assert row.state == want.value and row.slurm_job_id == str(job.job_id)
    assert result.relaunch == []


def test_unknown_launch_found_only_in_sacct_follows_its_end(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, (t,) = submit(service, training())
    attempt_id = place(service.db, t, state=AttemptState.LAUNCH_UNKNOWN)
    job = _tagged(fake, attempt_id)
    fake.finish(job.job_id, "COMPLETED", 0)
    job.in_squeue = False
    result, _ = _reconcile(service, fake, leadership, later_s=60)
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.SUCCEEDED.value and row.slurm_job_id == str(job.job_id)
    assert result.relaunch == []


def test_unknown_launch_absent_is_relaunched_only_after_the_window(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, (t,) = submit(service, training())
    attempt_id = place(service.db, t, state=AttemptState.LAUNCH_UNKNOWN)
    early, _ = _reconcile(service, fake, leadership)
    assert early.relaunch == [] and attempt(service.db, attempt_id).state == AttemptState.LAUNCH_UNKNOWN.value
    late, _ = _reconcile(service, fake, leadership, later_s=SETTINGS.unknown_window_s + 1)
    assert late.relaunch == [attempt_id]
    assert attempt(service.db, attempt_id).state == AttemptState.LAUNCH_UNKNOWN.value
    assert fake.calls["submit"] == 0  # the reconciler only lists it; the daemon relaunches


def test_unknown_launch_that_lags_in_sacct_is_not_relaunched_while_in_squeue(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, (t,) = submit(service, training())
    attempt_id = place(service.db, t, state=AttemptState.LAUNCH_UNKNOWN)
    job = _tagged(fake, attempt_id, state="PENDING")
    job.in_sacct = False
    result, _ = _reconcile(service, fake, leadership, later_s=SETTINGS.unknown_window_s + 1)
    assert result.relaunch == []
    assert attempt(service.db, attempt_id).slurm_job_id == str(job.job_id)


def test_launching_without_an_id_past_the_window_becomes_unknown_and_relaunches(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, (t,) = submit(service, training())
    attempt_id = place(service.db, t, state=AttemptState.LAUNCHING)  # crashed before the id was recorded
    early, _ = _reconcile(service, fake, leadership)
    assert early.relaunch == [] and attempt(service.db, attempt_id).state == AttemptState.LAUNCHING.value
    late, _ = _reconcile(service, fake, leadership, later_s=SETTINGS.unknown_window_s + 1)
    assert late.relaunch == [attempt_id]
    assert attempt(service.db, attempt_id).state == AttemptState.LAUNCH_UNKNOWN.value


def test_attempt_that_went_live_after_a_squeue_only_read_is_not_judged(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    reconciler = Reconciler(service.db, fake, SETTINGS)
    observation = observe(fake, reconciler.since, live_ids=[], site=reconciler.site)  # nothing live: sacct is skipped
    assert not observation.accounting_read and fake.calls["sacct"] == 0
    _, (t,) = submit(service, training())
    attempt_id = place(service.db, t, state=AttemptState.LAUNCHING)  # live only after the reads
    late = dataclasses.replace(observation, at=observation.at + timedelta(seconds=SETTINGS.unknown_window_s + 1))
    result = reconciler.apply(late, leadership)
    assert result.relaunch == [] and result.slurm_reads == 1
    assert attempt(service.db, attempt_id).state == AttemptState.LAUNCHING.value
    judged, _ = _reconcile(service, fake, leadership, later_s=SETTINGS.unknown_window_s + 1)
    assert judged.relaunch == [attempt_id]  # once sacct was read too, the absence is confirmed


def test_launched_attempt_unseen_past_lost_grace_is_lost(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, attempt_id, job = _launched(service, fake)
    _reconcile(service, fake, leadership)  # seen once: running
    del fake.jobs[job.job_id]  # Slurm forgot it (controller state lost, sacct purged)
    before, _ = _reconcile(service, fake, leadership, later_s=SETTINGS.lost_grace_s - 10)
    assert before.lost == [] and attempt(service.db, attempt_id).state == AttemptState.RUNNING.value
    after, _ = _reconcile(service, fake, leadership, later_s=SETTINGS.lost_grace_s + 1)
    assert after.lost == [attempt_id]
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.LOST.value and row.failure_category == "lost"
    assert task(service.db, t).state == TaskState.PENDING.value  # lost is retried by default


def test_orphans_are_cancelled(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    site = ensure_site_id(service.db)
    _, (t,) = submit(service, training())
    ended = place(service.db, t, state=AttemptState.SUCCEEDED)
    orphan_of_ended = _tagged(fake, ended)  # a tag older than sites: ours, its attempt is in the store
    orphan_unknown = fake.add_job("train", tags.comment(site, "9a8b7c6d-0000-0000-0000-000000000000"))
    finished_orphan = fake.add_job("train", tags.comment(site, "11111111-2222-3333-4444-555555555555"))
    fake.finish(finished_orphan.job_id)
    foreign = fake.add_job("someone-elses-job")
    result, _ = _reconcile(service, fake, leadership)
    assert sorted(result.orphans_cancelled) == sorted([str(orphan_of_ended.job_id), str(orphan_unknown.job_id)])
    assert orphan_of_ended.state == "CANCELLED" and orphan_unknown.state == "CANCELLED"
    assert foreign.state == "RUNNING" and finished_orphan.state == "COMPLETED"
    assert attempt(service.db, ended).state == AttemptState.SUCCEEDED.value


def test_a_second_active_job_for_one_attempt_is_cancelled(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, attempt_id, own = _launched(service, fake)
    duplicate = _tagged(fake, attempt_id)
    result, _ = _reconcile(service, fake, leadership)
    assert result.duplicates_cancelled == [str(duplicate.job_id)]
    assert duplicate.state == "CANCELLED" and own.state == "RUNNING"
    row = attempt(service.db, attempt_id)
    assert row.slurm_job_id == str(own.job_id) and row.state == AttemptState.RUNNING.value


def test_duplicates_of_an_unknown_launch_keep_the_oldest_job(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, (t,) = submit(service, training())
    attempt_id = place(service.db, t, state=AttemptState.LAUNCH_UNKNOWN)
    first, second = _tagged(fake, attempt_id), _tagged(fake, attempt_id)
    result, _ = _reconcile(service, fake, leadership)
    assert result.duplicates_cancelled == [str(second.job_id)]
    assert attempt(service.db, attempt_id).slurm_job_id == str(first.job_id)
    assert [job.job_id for job in fake.active_jobs()] == [first.job_id]


def test_het_job_is_followed_through_its_leader_component(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, (t,) = submit(service, training(workers=2))
    attempt_id = place(service.db, t, [share("node1"), share("node2")], AttemptState.LAUNCH_UNKNOWN)
    script = (
        f"#!/bin/bash\n#SBATCH --job-name=ms-{attempt_id}\n#SBATCH --comment=metasched:attempt={attempt_id}:token=1\n"
        "#SBATCH --nodelist=node1\n#SBATCH hetjob\n#SBATCH --nodelist=node2\n"
    )
    job_id = fake.submit(script)
    fake.start(job_id)
    result, _ = _reconcile(service, fake, leadership)
    assert result.duplicates_cancelled == [] and result.orphans_cancelled == []
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.RUNNING.value and row.slurm_job_id == str(job_id)


@pytest.mark.parametrize("which", ["squeue", "sacct"])
def test_a_failing_read_raises_and_changes_nothing(service: Service, which: str) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, attempt_id, job = _launched(service, fake)
    _, (u,) = submit(service, training("unknown"))
    unknown = place(service.db, u, state=AttemptState.LAUNCH_UNKNOWN)
    fake.finish(job.job_id, "FAILED", 1)
    setattr(fake, f"{which}_fault", SlurmTransient(f"{which}: slurmctld not responding"))
    before = attempt(service.db, attempt_id)
    with pytest.raises(SlurmTransient):
        Reconciler(service.db, fake, SETTINGS).run(leadership)
    after = attempt(service.db, attempt_id)
    assert (after.state, after.version, after.last_seen_at) == (before.state, before.version, before.last_seen_at)
    assert attempt(service.db, unknown).state == AttemptState.LAUNCH_UNKNOWN.value
    assert task(service.db, t).state == TaskState.SCHEDULED.value
    assert fake.cancels == []


def test_stopping_attempt_slurm_never_had_ends_after_the_window(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, (t,) = submit(service, checkpointing())
    attempt_id = place(service.db, t, state=AttemptState.STOPPING, stop_reason="preempt")
    early, _ = _reconcile(service, fake, leadership)
    assert early.transitions == 0
    _reconcile(service, fake, leadership, later_s=SETTINGS.unknown_window_s + 1)
    assert attempt(service.db, attempt_id).state == AttemptState.PREEMPTED.value
    assert [a.state for a in attempts_of(service.db, t)] == ["preempted"]
    assert task(service.db, t).state == TaskState.PENDING.value


def test_observation_prefers_squeue_over_sacct() -> None:
    now = utcnow()
    running = Sighting("7", map_state("RUNNING"), ("node1",), "squeue")
    done = Sighting("7", map_state("COMPLETED", 0), ("node1",), "sacct")
    observation = Observation(at=now, squeue={"a": [running]}, sacct={"a": [done], "b": [done]})
    assert observation.sightings("a") == [running]
    assert observation.sightings("b") == [done]
    assert observation.sightings("c") == []


def test_user_cancel_during_a_preempt_stop_cancels_the_task(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    job_id, (t,) = submit(service, checkpointing())
    job = fake.add_job("placeholder")
    attempt_id = place(service.db, t, state=AttemptState.STOPPING, stop_reason="preempt", slurm_job_id=str(job.job_id))
    job.name, job.comment = f"ms-{attempt_id}", f"metasched:attempt={attempt_id}:token=1"
    service.cancel(job_id)
    fake.cancel([job.job_id])
    _reconcile(service, fake, leadership)
    assert attempt(service.db, attempt_id).state in {AttemptState.PREEMPTED.value, AttemptState.CANCELLED.value}
    assert task(service.db, t).state == TaskState.CANCELLED.value


def test_het_job_ended_is_followed_through_sacct(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, (t,) = submit(service, training(workers=2))
    attempt_id = place(service.db, t, [share("node1"), share("node2")], AttemptState.LAUNCHING)
    script = (
        f"#!/bin/bash\n#SBATCH --job-name=ms-{attempt_id}\n#SBATCH --comment=metasched:attempt={attempt_id}:token=1\n"
        "#SBATCH --nodelist=node1\n#SBATCH hetjob\n#SBATCH --nodelist=node2\n"
    )
    job_id = fake.submit(script)
    fake.start(job_id)
    fake.finish(job_id, "FAILED", 2)
    fake.jobs[job_id].in_squeue = False
    result, _ = _reconcile(service, fake, leadership)
    assert result.duplicates_cancelled == []
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.FAILED.value and row.exit_code == 2 and row.slurm_job_id == str(job_id)


def test_cancelled_outside_metasched_is_lost_and_retried(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, attempt_id, job = _launched(service, fake)
    fake.cancel([job.job_id])  # an operator's scancel: nobody asked metasched
    _reconcile(service, fake, leadership)
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.LOST.value and row.failure_category == "lost"
    assert task(service.db, t).state == TaskState.PENDING.value


@pytest.mark.parametrize(
    ("slurm_state", "exit_code", "category"),
    [("TIMEOUT", 0, "timeout"), ("OUT_OF_MEMORY", 0, "oom"), ("FAILED", 0, "unknown"), ("BOOT_FAIL", 0, "node_failure")],
)
def test_failure_states_map_to_categories(service: Service, slurm_state: str, exit_code: int, category: str) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, attempt_id, job = _launched(service, fake)
    fake.finish(job.job_id, slurm_state, exit_code)
    _reconcile(service, fake, leadership)
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.FAILED.value and row.failure_category == category


def test_a_job_that_completes_before_its_cancel_lands_succeeds(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, attempt_id, job = _launched(service, fake)
    service.cancel(task(service.db, t).job_id)
    fake.finish(job.job_id, "COMPLETED", 0)
    _reconcile(service, fake, leadership)
    assert attempt(service.db, attempt_id).state == AttemptState.SUCCEEDED.value
    assert task(service.db, t).state == TaskState.SUCCEEDED.value


def _transitions(db, attempt_id: str, task_id: str):
    """_transitions are the log lines of one attempt and its task, oldest first."""
    from sqlalchemy import select

    from meta.store.models import Transition

    with db.session() as session:
        rows = session.scalars(
            select(Transition).where(Transition.entity_id.in_([attempt_id, task_id])).order_by(Transition.id)
        ).all()
        return [(r.entity, r.stimulus_id, r.from_state, r.to_state, r.reason, r.actor) for r in rows]


def test_a_burst_moves_together_and_logs_like_one_at_a_time(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    launched = [_launched(service, fake, training(name=f"burst-{i}")) for i in range(5)]
    result, _ = _reconcile(service, fake, leadership)
    assert result.transitions == 5
    for t, attempt_id, job in launched:
        assert attempt(service.db, attempt_id).state == AttemptState.RUNNING.value
        assert task(service.db, t).state == TaskState.RUNNING.value
        stimulus = f"slurm:{job.job_id}:RUNNING:running"
        assert _transitions(service.db, attempt_id, t)[-2:] == [
            ("attempt", stimulus, "launching", "running", "Slurm RUNNING", "reconciler"),
            ("task", stimulus, "scheduled", "running", "Slurm RUNNING", "reconciler"),
        ]
    for _, _, job in launched:
        fake.finish(job.job_id, "COMPLETED", 0)
    finished: list[str] = []
    reconciler = Reconciler(service.db, fake, SETTINGS, on_success=lambda _s, a: finished.append(a.id))
    assert reconciler.apply(observe(fake, reconciler.since(), site=reconciler.site), leadership).transitions == 5
    assert sorted(finished) == sorted(a for _, a, _ in launched)
    for t, attempt_id, _ in launched:
        _assert_succeeded(service, t, attempt_id)


def test_a_burst_with_one_odd_task_falls_back_to_one_at_a_time(service: Service) -> None:
    from sqlalchemy import update

    from meta.store.models import Task

    fake = FakeSlurm()
    leadership = lead(service.db)
    launched = [_launched(service, fake, training(name=f"odd-{i}")) for i in range(3)]
    odd_task, odd_attempt, _ = launched[1]
    with service.db.session() as session:  # the task ended behind the attempt's back
        session.execute(update(Task).where(Task.id == odd_task).values(state=TaskState.CANCELLED.value))
    result, _ = _reconcile(service, fake, leadership)
    assert result.transitions == 2
    assert attempt(service.db, odd_attempt).state == AttemptState.LAUNCHING.value
    for t, attempt_id, _ in (launched[0], launched[2]):
        assert attempt(service.db, attempt_id).state == AttemptState.RUNNING.value
        assert task(service.db, t).state == TaskState.RUNNING.value


def test_a_running_attempt_has_no_exit_code_until_it_ends(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    _, attempt_id, job = _launched(service, fake)
    job.exit_code = 0  # squeue shows 0:0 for a running job
    _reconcile(service, fake, leadership)
    row = attempt(service.db, attempt_id)
    assert row.state == AttemptState.RUNNING.value and row.exit_code is None  # status showed "EXIT 0"
    fake.finish(job.job_id, "FAILED", 3)
    _reconcile(service, fake, leadership)
    assert attempt(service.db, attempt_id).exit_code == 3


def test_a_steady_sighting_is_stored_only_when_due_and_lost_counts_from_the_last_one(service: Service) -> None:
    fake = FakeSlurm()
    leadership = lead(service.db)
    t, attempt_id, job = _launched(service, fake)
    reconciler = Reconciler(service.db, fake, SETTINGS)

    def run(later_s: float):
        observation = observe(fake, reconciler.since(), site=reconciler.site)
        return reconciler.apply(dataclasses.replace(observation, at=observation.at + timedelta(seconds=later_s)), leadership)

    run(0)  # seen: running, sighting stored
    first = attempt(service.db, attempt_id).last_seen_at
    run(10)  # steady, within renew_every_s: the stored sighting stays, the lease too
    assert attempt(service.db, attempt_id).last_seen_at == first
    run(SETTINGS.renew_every_s + 1)  # due: written
    assert attempt(service.db, attempt_id).last_seen_at > first
    run(SETTINGS.renew_every_s + 20)  # remembered, not stored
    del fake.jobs[job.job_id]  # Slurm forgot it
    # the store's sighting is 19 s older than the remembered one: lost counts from the remembered one
    assert run(SETTINGS.renew_every_s + 20 + SETTINGS.lost_grace_s - 5).lost == []
    assert run(SETTINGS.renew_every_s + 20 + SETTINGS.lost_grace_s + 1).lost == [attempt_id]


def _fences(monkeypatch: pytest.MonkeyPatch) -> list[int]:
    """_fences counts the reconciler's fenced transactions (one fence each)."""
    import meta.cycle.reconcile.reconciler as reconciler_module

    calls: list[int] = []
    real = reconciler_module.fence

    def counted(session, leadership):  # noqa: ANN001, ANN202 - the wrapped fence's own
        calls.append(1)
        return real(session, leadership)

    monkeypatch.setattr(reconciler_module, "fence", counted)
    return calls


def test_a_few_ends_among_many_steady_jobs_are_one_transaction(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    import meta.cycle.reconcile.reconciler as reconciler_module

    monkeypatch.setattr(reconciler_module, "_CHUNK", 4)  # 12 running jobs are 3 chunks of live rows
    fake = FakeSlurm()
    leadership = lead(service.db)
    launched = [_launched(service, fake, training(name=f"many-{i}")) for i in range(12)]
    reconciler = Reconciler(service.db, fake, SETTINGS)
    reconciler.apply(observe(fake, reconciler.since(), site=reconciler.site), leadership)  # all running, stored
    fences = _fences(monkeypatch)
    assert reconciler.apply(observe(fake, reconciler.since(), site=reconciler.site), leadership).transitions == 0
    assert fences == []  # steady, no sighting due: nothing written, no transaction
    ended = [launched[i] for i in (1, 6, 11)]
    for _, _, job in ended:
        fake.finish(job.job_id, "COMPLETED", 0)
    assert reconciler.apply(observe(fake, reconciler.since(), site=reconciler.site), leadership).transitions == 3
    assert len(fences) == 1  # the ends are the period's work, whatever else runs
    for t, attempt_id, _ in ended:
        _assert_succeeded(service, t, attempt_id)
    assert {attempt(service.db, a).state for i, (_, a, _) in enumerate(launched) if i not in (1, 6, 11)} == {"running"}


def test_work_larger_than_a_chunk_is_cut_into_transactions(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    import meta.cycle.reconcile.reconciler as reconciler_module

    monkeypatch.setattr(reconciler_module, "_CHUNK", 2)
    fake = FakeSlurm()
    leadership = lead(service.db)
    launched = [_launched(service, fake, training(name=f"cut-{i}")) for i in range(5)]
    fences = _fences(monkeypatch)
    result, _ = _reconcile(service, fake, leadership)
    assert result.transitions == 5 and len(fences) == 3  # 2 + 2 + 1 starts
    for t, attempt_id, _ in launched:
        assert attempt(service.db, attempt_id).state == AttemptState.RUNNING.value
        assert task(service.db, t).state == TaskState.RUNNING.value


def test_batches_keep_every_attempt_once_and_respect_the_size() -> None:
    from meta.cycle.reconcile.batches import batches

    key_a = (AttemptState.LAUNCHING, AttemptState.RUNNING, "Slurm RUNNING", None)
    key_b = (AttemptState.RUNNING, AttemptState.SUCCEEDED, "Slurm COMPLETED", 0)
    groups = {key_a: {f"a{i}": f"s{i}" for i in range(5)}, key_b: {"b0": "t0"}}
    cut = list(batches(groups, ["x", "y"], ["r0", "r1", "r2"], 4))
    assert [b.size for b in cut] == [4, 4, 3]
    seen = [a for b in cut for g in b.groups.values() for a in g] + [a for b in cut for a in b.alone + b.renew]
    assert sorted(seen) == sorted([*groups[key_a], "b0", "x", "y", "r0", "r1", "r2"])
    assert cut[1].groups[key_a] == {"a4": "s4"} and cut[1].groups[key_b] == {"b0": "t0"}  # stimuli kept
    assert list(batches({}, [], [], 4)) == []
