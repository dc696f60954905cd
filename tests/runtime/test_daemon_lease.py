"""The daemon keeps its leader lease through a long launch pass, and stops launching at once when it loses it."""

from __future__ import annotations

import threading
import time
from datetime import timedelta
from pathlib import Path

import pytest

import meta.cycle.daemon as daemon_module
from meta.cycle.actuate.actuator import SUBMIT_PARALLEL
from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.lease import LEASE_NAME, try_acquire
from meta.model.durations import utcnow
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.models import Attempt, LeaderLease
from slurm_bridge.fake import FakeSlurm
from tests.runtime.support import evaluation, settled


class _Clock:
    """_Clock is a monotonic clock the test moves (wall-clock time is left alone)."""

    def __init__(self) -> None:
        self.now = 1000.0

    def monotonic(self) -> float:
        return self.now

    @staticmethod
    def perf_counter() -> float:
        return time.perf_counter()


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> _Clock:
    fake = _Clock()
    monkeypatch.setattr(daemon_module, "time", fake)
    return fake


def _states(service: Service) -> list[str]:
    with service.db.session() as session:
        return sorted(a.state for a in session.query(Attempt))


def test_long_actuation_pass_renews_the_lease(
    service: Service, tmp_path: Path, clock: _Clock, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeSlurm()
    renewals = []
    real_renew = daemon_module.renew
    monkeypatch.setattr(daemon_module, "renew", lambda *a, **k: renewals.append(1) or real_renew(*a, **k))
    config = DaemonConfig(period_s=0.0, leader_lease_s=15.0, holder="slow", launch=LaunchSettings(log_dir=str(tmp_path)))
    daemon = Daemon(service.db, fake, config)
    for i in range(4):
        service.submit(evaluation(f"e{i}"))

    def slow_sbatch() -> None:
        clock.now += 6.0  # each sbatch takes 6 s: four of them outlast the 15 s lease

    fake.on_submit = slow_sbatch
    report = settled(daemon)
    assert report.error == "" and report.launched == 4
    # renewed by the launch pool during its pass (whenever a third of the lease had passed); the
    # four sbatch calls overlap (the pool keeps several in flight), so one renewal may cover them all
    assert len(renewals) >= 1
    assert _states(service) == ["launching"] * 4
    with service.db.session() as session:
        assert session.get(LeaderLease, LEASE_NAME).epoch == 1


def test_a_leader_that_loses_its_lease_mid_pass_launches_nothing_more(
    service: Service, tmp_path: Path, clock: _Clock
) -> None:
    fake = FakeSlurm()
    config = DaemonConfig(period_s=0.0, leader_lease_s=15.0, holder="old", launch=LaunchSettings(log_dir=str(tmp_path)))
    daemon = Daemon(service.db, fake, config)
    for i in range(12):
        service.submit(evaluation(f"e{i}"))

    stolen: list[bool] = []
    taken_over = threading.Event()

    def stolen_after_first() -> None:
        if not stolen:  # during the first sbatch the replica freezes; another one takes over
            stolen.append(True)
            with service.db.session() as session:
                session.get(LeaderLease, LEASE_NAME).expires_at = utcnow() - timedelta(seconds=1)
            assert try_acquire(service.db, "new", 60) is not None
            clock.now += 20.0
            taken_over.set()
        else:  # the calls already in flight take as long as the frozen one (a real sbatch is not instant)
            taken_over.wait(10)

    fake.on_submit = stolen_after_first
    assert settled(daemon).error == ""  # the period itself ended before its launches went out
    # one batch was marked "launching" under the valid epoch; once the lease was found taken, no
    # further sbatch went out: those attempts stay "launching" without a Slurm id, for the new
    # leader to look up by name (absent → the same attempt is submitted once, by the new leader)
    # at most the calls already in flight when the lease was stolen went out (SUBMIT_PARALLEL)
    sent = fake.calls["submit"]
    assert 1 <= sent <= SUBMIT_PARALLEL
    states = _states(service)
    assert states.count(AttemptState.LAUNCHING.value) == 12
    with service.db.session() as session:
        assert sum(1 for a in session.query(Attempt) if a.slurm_job_id is not None) == sent
    report = settled(daemon)  # the next period finds the lease taken and sends nothing
    assert report.leader is False and daemon.leadership is None and fake.calls["submit"] == sent
