"""A tag alone is not an attempt's job (issue 22): another user's job with the tag is ignored, audited, never cancelled."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

from sqlalchemy import select

from meta.cycle.lease import Leadership
from meta.cycle.reconcile import Reconciler, ReconcileSettings, observe
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.models import Attempt, AuditEvent, Job, Task
from slurm_bridge import tags
from slurm_bridge.fake import FakeJob, FakeSlurm
from tests.runtime.support import attempt, lead, place, submit, training

ALICE, BOB = 2001, 2002
SETTINGS = ReconcileSettings(unknown_window_s=15.0, lost_grace_s=120.0, lease_s=300.0, daemon_uid=0)


def _alices_attempt(service: Service, state: AttemptState, slurm_job_id: str | None = None) -> str:
    """_alices_attempt is an attempt of a job alice owns (it runs as uid 2001)."""
    _, (t,) = submit(service, training())
    with service.db.session() as session:
        task = session.get(Task, t)
        session.get(Job, task.job_id).owner_uid = ALICE
    return place(service.db, t, state=state, slurm_job_id=slurm_job_id)


def _tagged(fake: FakeSlurm, attempt_id: str, uid: int, state: str = "RUNNING") -> FakeJob:
    """_tagged is a job carrying the attempt's tag in its comment, run as ``uid``."""
    return fake.add_job("train", f"metasched:attempt={attempt_id}", state, ("node1",), uid=uid)


def _reconcile(reconciler: Reconciler, fake: FakeSlurm, leadership: Leadership, later_s: float = 0.0):
    observation = observe(fake, reconciler.since(), site=reconciler.site)
    observation = dataclasses.replace(observation, at=observation.at + timedelta(seconds=later_s))
    return reconciler.apply(observation, leadership)


def _spoof_rows(service: Service) -> list[AuditEvent]:
    with service.db.session() as session:
        rows = list(session.scalars(select(AuditEvent).where(AuditEvent.action == "job.tag.spoofed")))
        session.expunge_all()
        return rows


def test_a_spoofed_completed_job_does_not_end_a_running_attempt(service: Service) -> None:
    fake, leadership = FakeSlurm(), lead(service.db)
    own = fake.add_job("placeholder", uid=ALICE)
    attempt_id = _alices_attempt(service, AttemptState.RUNNING, str(own.job_id))
    own.comment = f"metasched:attempt={attempt_id}"
    own.in_squeue = own.in_sacct = False  # alice's own job left Slurm's lists
    spoof = _tagged(fake, attempt_id, BOB)
    fake.finish(spoof.job_id, "COMPLETED", 0)
    reconciler = Reconciler(service.db, fake, SETTINGS)
    first = _reconcile(reconciler, fake, leadership)
    assert attempt(service.db, attempt_id).state == AttemptState.RUNNING.value
    assert first.spoofed == [str(spoof.job_id)] and first.transitions == 0
    second = _reconcile(reconciler, fake, leadership)
    assert second.spoofed == []  # audited once
    (row,) = _spoof_rows(service)
    assert row.subject == attempt_id and row.actor == "reconciler"
    assert row.detail["slurm_job_id"] == str(spoof.job_id) and row.detail["uid"] == BOB
    # the grace runs from alice's own job, not from bob's: the attempt is lost, never succeeded
    _reconcile(reconciler, fake, leadership, later_s=SETTINGS.lost_grace_s + 1)
    assert attempt(service.db, attempt_id).state == AttemptState.LOST.value


def test_an_unknown_launch_adopts_its_own_job_by_tag_and_user_not_an_older_spoof(service: Service) -> None:
    fake, leadership = FakeSlurm(), lead(service.db)
    attempt_id = _alices_attempt(service, AttemptState.LAUNCH_UNKNOWN)
    spoof = _tagged(fake, attempt_id, BOB)  # the lower id: chosen first if a tag were enough
    fake.finish(spoof.job_id, "FAILED", 1)
    own = _tagged(fake, attempt_id, ALICE)
    result = _reconcile(Reconciler(service.db, fake, SETTINGS), fake, leadership)
    row = attempt(service.db, attempt_id)
    assert row.slurm_job_id == str(own.job_id) and row.state == AttemptState.RUNNING.value
    assert result.duplicates_cancelled == [] and result.spoofed == [str(spoof.job_id)]
    assert own.state == "RUNNING" and fake.cancels == []


def test_an_unknown_launch_with_only_a_spoof_is_relaunched_after_the_window(service: Service) -> None:
    fake, leadership = FakeSlurm(), lead(service.db)
    attempt_id = _alices_attempt(service, AttemptState.LAUNCH_UNKNOWN)
    spoof = _tagged(fake, attempt_id, BOB)
    fake.finish(spoof.job_id, "COMPLETED", 0)
    reconciler = Reconciler(service.db, fake, SETTINGS)
    early = _reconcile(reconciler, fake, leadership)
    assert attempt(service.db, attempt_id).state == AttemptState.LAUNCH_UNKNOWN.value and early.relaunch == []
    late = _reconcile(reconciler, fake, leadership, later_s=SETTINGS.unknown_window_s + 1)
    assert late.relaunch == [attempt_id] and attempt(service.db, attempt_id).slurm_job_id is None


def test_a_spoof_in_squeue_does_not_spare_the_accounting_read(service: Service) -> None:
    fake, leadership = FakeSlurm(), lead(service.db)
    own = fake.add_job("placeholder", uid=ALICE)
    attempt_id = _alices_attempt(service, AttemptState.RUNNING, str(own.job_id))
    own.comment = f"metasched:attempt={attempt_id}"
    fake.finish(own.job_id, "FAILED", 3)
    own.in_squeue = False  # only accounting still has alice's job
    _tagged(fake, attempt_id, BOB)  # bob's running job fills squeue for the attempt
    result = Reconciler(service.db, fake, SETTINGS).run(leadership)
    assert fake.calls["sacct"] == 1 and result.slurm_reads == 2
    assert attempt(service.db, attempt_id).state == AttemptState.FAILED.value


def test_the_orphan_sweep_leaves_a_spoofers_job_alone(service: Service) -> None:
    fake, leadership = FakeSlurm(), lead(service.db)
    reconciler = Reconciler(service.db, fake, SETTINGS)
    ended = _alices_attempt(service, AttemptState.SUCCEEDED)
    spoof = _tagged(fake, ended, BOB)
    # names no attempt at all, with this site's tag: only the daemon's own user's job would be ours
    stray = fake.add_job("train", tags.comment(reconciler.site, "no-such-attempt"), "RUNNING", ("node1",), uid=BOB)
    # the same with a tag older than sites: not this site's at all, so not even a spoof
    old_stray = _tagged(fake, "no-such-attempt-either", BOB)
    orphan = _tagged(fake, ended, ALICE)  # alice's own job of the ended attempt: a real orphan
    result = _reconcile(reconciler, fake, leadership)
    assert result.orphans_cancelled == [str(orphan.job_id)] and orphan.state == "CANCELLED"
    assert spoof.state == "RUNNING" and stray.state == "RUNNING" and old_stray.state == "RUNNING"
    assert sorted(result.spoofed) == sorted([str(spoof.job_id), str(stray.job_id)])
    assert result.legacy_ignored == [str(old_stray.job_id)]
    with service.db.session() as session:
        assert session.get(Attempt, ended).state == AttemptState.SUCCEEDED.value
