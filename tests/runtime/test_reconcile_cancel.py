"""A plain scancel of a metasched job: a cancel when accounting names someone allowed, else lost."""

from __future__ import annotations

import dataclasses
from datetime import timedelta

import pytest
from sqlalchemy import select

from meta.cycle.reconcile import Reconciler, ReconcileSettings, observe
from meta.cycle.reconcile.cancellers import CancellerLookup
from meta.model.states import AttemptState, JobState, TaskState
from meta.service.api import Service
from meta.store import audit
from meta.store.models import Attempt, Job, Task, Transition
from slurm_bridge.fake import FakeSlurm
from tests.runtime.support import attempt, inference, lead, place, share, submit, task, training

SETTINGS = ReconcileSettings(unknown_window_s=15.0, lost_grace_s=120.0, lease_s=300.0, cancel_attribution_s=30.0)
NAMES = {0: "root", 2001: "alice", 2002: "bob", 2004: "dave", 64030: "slurm"}
ALICE, BOB, DAVE, SLURM_USER, UNKNOWN = 2001, 2002, 2004, 64030, 3999


def _fake() -> FakeSlurm:
    fake = FakeSlurm()
    fake.add_user("alice", ["acme"])
    fake.add_user("bob", ["other"])
    fake.add_user("dave", ["acme"], coordinates=["acme"])
    return fake


class Reconciling:
    """Reconciling runs one reconciler (its attribution wait is its own) under one leadership."""

    def __init__(self, service: Service, fake: FakeSlurm) -> None:
        self.fake = fake
        self.leadership = lead(service.db)
        self.reconciler = Reconciler(service.db, fake, SETTINGS, cancellers=CancellerLookup(fake, names=NAMES.get))

    def period(self, later_s: float = 0.0) -> None:
        """period observes the fake (``later_s`` seconds from now) and applies it."""
        observation = observe(self.fake, self.reconciler.since(), self.reconciler._live_ids(), site=self.reconciler.site)
        observation = dataclasses.replace(observation, at=observation.at + timedelta(seconds=later_s))
        self.reconciler.apply(observation, self.leadership)


def _reconcile(service: Service, fake: FakeSlurm) -> Reconciling:
    reconciling = Reconciling(service, fake)
    reconciling.period()
    return reconciling


def _running(service: Service, fake: FakeSlurm, spec=None) -> tuple[str, str, str, int]:
    """_running is alice's job with one running attempt in Slurm: (job, task, attempt, Slurm id)."""
    job_id, tasks = submit(service, spec or training())
    attempt_id = place(service.db, tasks[0], [share("node1")], AttemptState.RUNNING)
    slurm = fake.add_job("train", f"metasched:attempt={attempt_id}", "RUNNING", ("node1",))
    with service.db.session() as session:
        session.get(Attempt, attempt_id).slurm_job_id = str(slurm.job_id)
        session.get(Job, job_id).owner_uid = ALICE
    return job_id, tasks[0], attempt_id, slurm.job_id


@pytest.mark.parametrize(("uid", "actor"), [(ALICE, "alice"), (DAVE, "dave"), (0, "root")])
def test_a_scancel_by_the_owner_a_coordinator_or_an_admin_cancels_the_job(service: Service, uid: int, actor: str) -> None:
    fake = _fake()
    job_id, task_id, attempt_id, slurm_id = _running(service, fake)
    fake.cancel([slurm_id], as_uid=uid)
    _reconcile(service, fake)
    row = attempt(service.db, attempt_id)
    assert (row.state, row.failure_category) == (AttemptState.CANCELLED.value, "cancelled")
    with service.db.session() as session:
        line = session.scalar(select(Transition).where(Transition.entity_id == attempt_id, Transition.to_state == "cancelled"))
        assert (line.reason, line.actor) == (f"Slurm CANCELLED by {actor} (scancel)", actor)
    assert task(service.db, task_id).state == TaskState.CANCELLED.value  # not pending: never relaunched
    assert service.status(job_id).state == JobState.CANCELLED
    with service.db.session() as session:
        [event] = [e for e in audit.read(session) if e.action == "job.cancel"]
    assert (event.actor, event.detail["via"], event.detail["slurm_job_id"]) == (actor, "scancel", str(slurm_id))


@pytest.mark.parametrize("uid", [BOB, SLURM_USER, UNKNOWN, None])
def test_a_cancel_nobody_allowed_can_be_named_for_is_lost_and_retried(service: Service, uid: int | None) -> None:
    fake = _fake()
    job_id, task_id, attempt_id, slurm_id = _running(service, fake)
    fake.cancel([slurm_id], as_uid=uid)  # bob is no member of acme; slurmctld's own; no such user; no uid
    _reconcile(service, fake)
    row = attempt(service.db, attempt_id)
    assert (row.state, row.failure_category) == (AttemptState.LOST.value, "lost")
    assert task(service.db, task_id).state == TaskState.PENDING.value
    with service.db.session() as session:
        assert not session.get(Job, job_id).cancel_requested
        assert [e for e in audit.read(session) if e.action == "job.cancel"] == []


def test_a_cancel_waits_for_accounting_to_say_who_then_is_lost(service: Service) -> None:
    fake = _fake()
    _, task_id, attempt_id, slurm_id = _running(service, fake)
    fake.cancel([slurm_id], as_uid=ALICE)
    fake.jobs[slurm_id].in_sacct = False  # slurmdbd has not recorded it yet: squeue says CANCELLED only
    reconciling = _reconcile(service, fake)
    assert attempt(service.db, attempt_id).state == AttemptState.RUNNING.value  # not judged yet
    reconciling.period(later_s=SETTINGS.cancel_attribution_s - 5)
    assert attempt(service.db, attempt_id).state == AttemptState.RUNNING.value
    reconciling.period(later_s=SETTINGS.cancel_attribution_s + 1)
    assert attempt(service.db, attempt_id).state == AttemptState.LOST.value
    assert task(service.db, task_id).state == TaskState.PENDING.value


def test_a_late_accounting_record_still_makes_it_a_cancel(service: Service) -> None:
    fake = _fake()
    job_id, task_id, attempt_id, slurm_id = _running(service, fake)
    fake.cancel([slurm_id], as_uid=ALICE)
    fake.jobs[slurm_id].in_sacct = False
    reconciling = _reconcile(service, fake)
    fake.jobs[slurm_id].in_sacct = True
    reconciling.period(later_s=10)
    assert attempt(service.db, attempt_id).state == AttemptState.CANCELLED.value
    assert service.status(job_id).state == JobState.CANCELLED


def test_a_scancel_of_one_partition_cancels_the_whole_job(service: Service, tmp_path) -> None:
    fake = _fake()
    job_id, task_id, attempt_id, slurm_id = _running(service, fake, inference(str(tmp_path / "out")))
    fake.cancel([slurm_id], as_uid=ALICE)
    _reconcile(service, fake)
    states = [t.state for t in service.status(job_id).tasks]
    assert states == [TaskState.CANCELLED.value, TaskState.CANCELLED.value]  # the pending partition too
    assert service.status(job_id).state == JobState.CANCELLED


def test_without_a_lookup_every_unrequested_cancel_is_lost(service: Service) -> None:
    fake = _fake()
    _, task_id, attempt_id, slurm_id = _running(service, fake)
    fake.cancel([slurm_id], as_uid=ALICE)
    Reconciler(service.db, fake, SETTINGS).run(lead(service.db))
    assert attempt(service.db, attempt_id).state == AttemptState.LOST.value


def test_a_scancel_of_an_array_elements_slurm_job_cancels_that_element_only(service: Service) -> None:
    # each element is its own Slurm job: scancel of it is scancel of one element, as in Slurm
    fake = _fake()
    job_id, task_id, attempt_id, slurm_id = _running(service, fake, training(array={"indexes": [0, 1, 2]}))
    fake.cancel([slurm_id], as_uid=ALICE)
    _reconcile(service, fake)
    assert attempt(service.db, attempt_id).state == AttemptState.CANCELLED.value
    with service.db.session() as session:
        job = session.get(Job, job_id)
        states = {t.name: t.state for t in session.scalars(select(Task).where(Task.job_id == job_id))}
        assert job.cancel_requested is False
        [event] = [e for e in audit.read(session) if e.action == "job.cancel"]
    assert states == {"0": TaskState.CANCELLED.value, "1": TaskState.PENDING.value, "2": TaskState.PENDING.value}
    assert (event.actor, event.detail["elements"]) == ("alice", ["0"])
    assert service.status(job_id).state == JobState.PENDING
