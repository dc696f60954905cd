"""Launches stream from a bounded pool behind the period: the period never waits for sbatch, the
next period sees the pool's progress, and the launch-unknown protocol keeps every attempt at
exactly one Slurm job through slow and failing sbatch calls, a crash mid-launch and a stop."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

from sqlalchemy import select

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.lease import LEASE_NAME, Leadership, try_acquire
from meta.cycle.reconcile import ReconcileSettings
from meta.model.durations import utcnow
from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from meta.store.models import Attempt, LeaderLease
from slurm_bridge.fake import REJECTED, TRANSIENT, UNKNOWN_AFTER, UNKNOWN_BEFORE, FakeSlurm
from tests.runtime.support import evaluation, settled

FINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}


def _daemon(service: Service, fake: FakeSlurm, tmp_path: Path, holder: str = "pool", workers: int = 4) -> Daemon:
    config = DaemonConfig(
        period_s=0.0,
        leader_lease_s=60.0,
        holder=holder,
        submit_timeout_s=0.0,  # the look-up window is the bare unknown window: 0 s, the harshest case
        submit_parallel=workers,
        launch=LaunchSettings(log_dir=str(tmp_path / holder)),
        reconcile=ReconcileSettings(unknown_window_s=0.0, lost_grace_s=600.0),
    )
    return Daemon(service.db, fake, config)


def _attempts(service: Service) -> list[Attempt]:
    with service.db.session() as session:
        return list(session.scalars(select(Attempt)))


def _one_job_each(service: Service, fake: FakeSlurm) -> None:
    """_one_job_each: every attempt has exactly one Slurm job, under the Slurm id it recorded."""
    for attempt in _attempts(service):
        jobs = fake.jobs_for(attempt.id)
        assert len(jobs) <= 1, f"attempt {attempt.id} has {len(jobs)} Slurm jobs"
        if attempt.state == AttemptState.SUCCEEDED.value:
            assert jobs and attempt.slurm_job_id == str(jobs[0].job_id)


def _run_to_end(service: Service, daemon: Daemon, fake: FakeSlurm, jobs: list[str], periods: int = 40) -> None:
    for _ in range(periods):
        assert settled(daemon).error == ""
        fake.advance()
        if all(service.status(job).state in FINAL for job in jobs):
            return
    raise AssertionError([service.status(job).state for job in jobs])


class _Gate:
    """_Gate holds every sbatch until opened, counting how many run at once."""

    def __init__(self) -> None:
        self.open = threading.Event()
        self.entered = threading.Semaphore(0)
        self._lock = threading.Lock()
        self.running = 0
        self.peak = 0

    def __call__(self) -> None:
        with self._lock:
            self.running += 1
            self.peak = max(self.peak, self.running)
        self.entered.release()
        self.open.wait(30)
        with self._lock:
            self.running -= 1


def test_the_period_commits_placements_without_waiting_for_sbatch(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    gate = _Gate()
    fake.on_submit = gate
    daemon = _daemon(service, fake, tmp_path)
    jobs = [service.submit(evaluation(f"e{i}")).job.id for i in range(6)]
    started = time.monotonic()
    report = daemon.period()
    assert time.monotonic() - started < 10  # every sbatch is held: a waiting period would take 30 s
    assert report.error == "" and report.placed == 6 and report.queued == 6 and report.launched == 0
    assert gate.entered.acquire(timeout=10)  # the pool is sending behind the period
    # the next period runs while the launches hang: it queues nothing twice and judges none of them
    report = daemon.period()
    assert report.error == "" and report.queued == 0 and report.launched == 0
    assert all(a.state in ("created", "launching") and a.slurm_job_id is None for a in _attempts(service))
    gate.open.set()
    assert daemon.settle_launches(10)
    report = daemon.period()  # the pool's progress is what this period observes
    assert report.error == "" and report.launched == 6
    assert all(a.slurm_job_id is not None for a in _attempts(service))
    _run_to_end(service, daemon, fake, jobs)
    assert len(fake.jobs) == 6
    _one_job_each(service, fake)


def test_the_pool_keeps_at_most_its_size_of_sbatch_calls_in_flight(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    gate = _Gate()
    fake.on_submit = gate
    daemon = _daemon(service, fake, tmp_path, workers=2)
    for i in range(10):
        service.submit(evaluation(f"e{i}"))
    assert daemon.period().error == ""
    assert gate.entered.acquire(timeout=10) and gate.entered.acquire(timeout=10)
    time.sleep(0.3)  # a third call, were the pool unbounded, would have started by now
    assert gate.running == 2 and fake.calls["submit"] == 2
    gate.open.set()
    assert daemon.settle_launches(10)
    assert gate.peak == 2 and fake.calls["submit"] == 10


def test_a_slow_sbatch_is_never_judged_absent_nor_relaunched(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    gate = _Gate()
    fake.on_submit = gate
    daemon = _daemon(service, fake, tmp_path, workers=1)
    job = service.submit(evaluation()).job.id
    assert daemon.period().error == ""
    assert gate.entered.acquire(timeout=10)
    # the unknown window is 0 s: without the pool's in-flight set these periods would find the
    # "launching" attempt absent from Slurm and submit it a second time
    for _ in range(3):
        report = daemon.period()
        assert report.error == "" and report.queued == 0
    (attempt,) = _attempts(service)
    assert attempt.state == AttemptState.LAUNCHING.value and fake.calls["submit"] == 1
    gate.open.set()
    _run_to_end(service, daemon, fake, [job])
    assert service.status(job).state == JobState.SUCCEEDED and fake.calls["submit"] == 1
    _one_job_each(service, fake)


def test_failing_sbatch_calls_behind_the_period_end_in_one_job_per_attempt(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    fake.fail_next_submits(UNKNOWN_AFTER, UNKNOWN_BEFORE, TRANSIENT, REJECTED, UNKNOWN_AFTER)
    daemon = _daemon(service, fake, tmp_path)
    jobs = [service.submit(evaluation(f"e{i}", retry={"backoff": 0})).job.id for i in range(8)]
    _run_to_end(service, daemon, fake, jobs)
    assert [service.status(job).state for job in jobs] == [JobState.SUCCEEDED] * 8
    assert not fake.submit_faults
    rejected = [a for a in _attempts(service) if a.failure_category == "launch_failure"]
    assert len(rejected) == 1 and len(_attempts(service)) == 9  # only the rejection took a new attempt
    _one_job_each(service, fake)


def test_a_crash_mid_launch_is_reconciled_by_the_next_leader(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    first = _daemon(service, fake, tmp_path, holder="first", workers=2)
    jobs = [service.submit(evaluation(f"e{i}")).job.id for i in range(8)]

    def die_before_recording(*_args: object) -> None:
        raise RuntimeError("killed before the Slurm ids were committed")

    first.actuator._record = die_before_recording  # type: ignore[method-assign]

    def crash_at_the_third_sbatch() -> None:
        if fake.calls["submit"] == 3:
            first.launches.close(0.0)  # the process dies: nothing more is sent

    fake.on_submit = crash_at_the_third_sbatch
    assert first.period().error == ""
    deadline = time.monotonic() + 10
    while fake.calls["submit"] < 3 and time.monotonic() < deadline:
        time.sleep(0.01)
    time.sleep(0.2)  # calls already in flight when it died finish
    sent = len(fake.jobs)
    assert 3 <= sent <= 4
    attempts = _attempts(service)
    assert [a.state for a in attempts] == ["launching"] * 8 and all(a.slurm_job_id is None for a in attempts)
    with service.db.session() as session:  # its lease runs out
        session.get(LeaderLease, LEASE_NAME).expires_at = utcnow() - timedelta(seconds=1)
    second = _daemon(service, fake, tmp_path, holder="second")
    _run_to_end(service, second, fake, jobs)
    assert second.leadership == Leadership("second", 2)
    assert [service.status(job).state for job in jobs] == [JobState.SUCCEEDED] * 8
    # the landed ones were found by tag, the unsent ones confirmed absent and sent once
    assert len(_attempts(service)) == 8 and len(fake.jobs) == 8
    _one_job_each(service, fake)


def test_stopping_the_daemon_stops_the_pool_before_the_lease_is_released(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    stop = threading.Event()

    def slow_then_stop() -> None:
        stop.set()  # SIGTERM arrives while launches stream
        time.sleep(0.2)

    fake.on_submit = slow_then_stop
    daemon = _daemon(service, fake, tmp_path, workers=2)
    for i in range(30):
        service.submit(evaluation(f"e{i}"))
    runner = threading.Thread(target=daemon.run, args=(stop,))
    runner.start()
    runner.join(20)
    assert not runner.is_alive()
    sent = fake.calls["submit"]
    assert 1 <= sent < 30  # the in-flight calls finished, the rest never went out
    time.sleep(0.5)
    assert fake.calls["submit"] == sent  # nothing is sent once run() returned
    assert try_acquire(service.db, "next", 30) == Leadership("next", 2)  # released at exit
    recorded = [a for a in _attempts(service) if a.slurm_job_id is not None]
    assert len(recorded) == sent  # what went out was recorded before the lease was released
