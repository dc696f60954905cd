"""The tag names the site (issue 26): another metasched site's jobs on the same cluster are left alone.

A job whose tag names another site is never followed, counted as an attempt's job, cancelled
(as an orphan or a duplicate), adopted, nor reported as spoofed; a tag older than sites is
this site's only when its attempt is in this store. The fake Slurm holds both sites' jobs;
tests/integration/test_two_sites.py runs two real daemons on the dev cluster.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Collection
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.lease import Leadership
from meta.cycle.reconcile import Reconciler, ReconcileResult, ReconcileSettings, observe
from meta.cycle.reconcile.ownership import Claims
from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from meta.store.models import Attempt, AuditEvent, Job, Task
from meta.store.site import ensure_site_id, stored_site_id
from slurm_bridge import tags
from slurm_bridge.fake import FakeJob, FakeSlurm
from tests.conftest import sqlite_database
from tests.runtime.support import attempt, evaluation, lead, place, settled, submit, training

OTHER = "othersite000"  # the other metasched instance on the cluster (staging, say)
ALICE = 2001
SETTINGS = ReconcileSettings(unknown_window_s=15.0, lost_grace_s=120.0, lease_s=300.0, daemon_uid=0)


def _reconcile(reconciler: Reconciler, fake: FakeSlurm, leadership: Leadership, later_s: float = 0.0) -> ReconcileResult:
    """_reconcile observes the fake as the reconciler would and applies it, ``later_s`` into the future."""
    observation = observe(fake, reconciler.since(), site=reconciler.site)
    observation = dataclasses.replace(observation, at=observation.at + timedelta(seconds=later_s))
    return reconciler.apply(observation, leadership)


def _job(fake: FakeSlurm, site: str | None, attempt_id: str, state: str = "RUNNING", uid: int = 0) -> FakeJob:
    """_job is a job tagged for ``attempt_id`` by ``site`` (None: the tag older than sites), run as ``uid``."""
    comment = tags.comment(site, attempt_id) if site is not None else f"metasched:attempt={attempt_id}"
    return fake.add_job("train", comment, state, ("node1",), uid=uid)


def _audit(service: Service) -> list[str]:
    with service.db.session() as session:
        return list(session.scalars(select(AuditEvent.action)))


def _owned_by_alice(service: Service, state: AttemptState, slurm_job_id: str | None = None) -> str:
    """_owned_by_alice is an attempt of a job alice owns (its Slurm job runs as uid 2001)."""
    _, (t,) = submit(service, training())
    with service.db.session() as session:
        session.get(Job, session.get(Task, t).job_id).owner_uid = ALICE
    return place(service.db, t, state=state, slurm_job_id=slurm_job_id)


def test_the_store_draws_its_site_once(service: Service) -> None:
    first = ensure_site_id(service.db)
    assert ensure_site_id(service.db) == first == stored_site_id(service.db)
    assert tags.parse_tag("x", tags.comment(first, "a-1")).site == first
    assert Reconciler(service.db, FakeSlurm(), SETTINGS).site == first


def test_another_sites_jobs_are_not_cancelled_counted_or_reported(service: Service) -> None:
    fake, leadership = FakeSlurm(), lead(service.db)
    reconciler = Reconciler(service.db, fake, SETTINGS)
    own = _job(fake, reconciler.site, "placeholder", uid=ALICE)
    running = _owned_by_alice(service, AttemptState.RUNNING, str(own.job_id))
    own.comment = tags.comment(reconciler.site, running)
    own.in_squeue = own.in_sacct = False  # Slurm shows nothing of our job a while: only theirs remain
    ended = _owned_by_alice(service, AttemptState.SUCCEEDED)
    theirs = [
        _job(fake, OTHER, "their-attempt-1"),  # as the daemon's user: an orphan were it ours
        _job(fake, OTHER, "their-attempt-2", uid=ALICE),  # as alice, whom this store knows
        _job(fake, OTHER, running, uid=ALICE),  # their tag with our live attempt's id (copied): not its job
        _job(fake, OTHER, running, uid=ALICE),  # ... twice: no duplicate either
        _job(fake, OTHER, ended, uid=ALICE),  # ... and our ended one's: no orphan
        _job(fake, OTHER, running, uid=2002),  # ... as bob: not even a spoof of ours
    ]
    fake.finish(theirs[2].job_id, "COMPLETED", 0)  # would end our attempt, were it counted as its job
    for later_s in (0.0, SETTINGS.lost_grace_s / 2):
        result = _reconcile(reconciler, fake, leadership, later_s)
        assert result.orphans_cancelled == result.duplicates_cancelled == result.spoofed == []
        assert result.legacy_ignored == [] and result.foreign > 0
    assert fake.cancels == [] and all(job.state in ("RUNNING", "COMPLETED") for job in theirs)
    row = attempt(service.db, running)
    assert (row.state, row.slurm_job_id) == (AttemptState.RUNNING.value, str(own.job_id))
    assert attempt(service.db, ended).state == AttemptState.SUCCEEDED.value
    assert "job.tag.spoofed" not in _audit(service)


def test_an_unknown_launch_never_takes_another_sites_job(service: Service) -> None:
    fake, leadership = FakeSlurm(), lead(service.db)
    reconciler = Reconciler(service.db, fake, SETTINGS)
    attempt_id = _owned_by_alice(service, AttemptState.LAUNCH_UNKNOWN)
    theirs = _job(fake, OTHER, attempt_id, uid=ALICE)  # the look-up by tag must not find it
    early = _reconcile(reconciler, fake, leadership)
    assert attempt(service.db, attempt_id).slurm_job_id is None and early.relaunch == []
    late = _reconcile(reconciler, fake, leadership, later_s=SETTINGS.unknown_window_s + 1)
    assert late.relaunch == [attempt_id]  # confirmed absent: it is launched again, under this site's tag
    assert theirs.state == "RUNNING" and fake.cancels == []


def test_a_tag_older_than_sites_is_ours_when_its_attempt_is_stored(service: Service) -> None:
    fake, leadership = FakeSlurm(), lead(service.db)
    reconciler = Reconciler(service.db, fake, SETTINGS)
    launching = _owned_by_alice(service, AttemptState.LAUNCH_UNKNOWN)
    before_upgrade = _job(fake, None, launching, uid=ALICE)  # sbatch of the version before the upgrade
    ended = _owned_by_alice(service, AttemptState.SUCCEEDED)
    old_orphan = _job(fake, None, ended, uid=ALICE)
    result = _reconcile(reconciler, fake, leadership)
    row = attempt(service.db, launching)
    assert (row.state, row.slurm_job_id) == (AttemptState.RUNNING.value, str(before_upgrade.job_id))
    assert result.orphans_cancelled == [str(old_orphan.job_id)] and old_orphan.state == "CANCELLED"
    fake.finish(before_upgrade.job_id, "COMPLETED", 0)
    _reconcile(reconciler, fake, leadership)
    assert attempt(service.db, launching).state == AttemptState.SUCCEEDED.value
    assert result.legacy_ignored == []


def test_a_tag_older_than_sites_naming_no_stored_attempt_is_left_alone_and_logged_once(
    service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    fake, leadership = FakeSlurm(), lead(service.db)
    reconciler = Reconciler(service.db, fake, SETTINGS)
    stray = _job(fake, None, "launched-by-another-store")  # as the daemon's user: an orphan, were it ours
    named = fake.add_job("ms-9a8b7c6d-0000-0000-0000-000000000000")  # a name older than comments
    first = _reconcile(reconciler, fake, leadership)
    assert sorted(first.legacy_ignored) == sorted([str(stray.job_id), str(named.job_id)])
    second = _reconcile(reconciler, fake, leadership)
    assert second.legacy_ignored == [] and second.orphans_cancelled == first.orphans_cancelled == []
    assert stray.state == named.state == "RUNNING" and fake.cancels == []
    warnings = [r.getMessage() for r in caplog.records if "tag without a site" in r.getMessage()]
    assert len(warnings) == 2 and "job.tag.spoofed" not in _audit(service)


def test_another_sites_jobs_never_reach_the_store(service: Service, monkeypatch: pytest.MonkeyPatch) -> None:
    """The site is judged while Slurm's rows are read: no claim is looked up for another site's job."""
    fake, leadership = FakeSlurm(), lead(service.db)
    reconciler = Reconciler(service.db, fake, SETTINGS)
    for i in range(50):
        _job(fake, OTHER, f"theirs-{i}")
    ours = _job(fake, reconciler.site, "ours-unknown")
    asked: list[str] = []
    load = Claims.load

    def recording(session, attempt_ids: Collection[str], *args, **kwargs):  # noqa: ANN001, ANN202
        asked.extend(attempt_ids)
        return load(session, attempt_ids, *args, **kwargs)

    monkeypatch.setattr(Claims, "load", staticmethod(recording))
    result = _reconcile(reconciler, fake, leadership)
    assert set(asked) == {"ours-unknown"} and result.foreign == 100  # 50 in squeue, 50 in sacct
    assert result.orphans_cancelled == [str(ours.job_id)]  # this site's tag, the daemon's user: an orphan


def _daemon(db, fake: FakeSlurm, tmp_path: Path, holder: str) -> Daemon:  # noqa: ANN001
    """_daemon is one site's daemon over its own store, on the shared fake Slurm."""
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder=holder, submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / holder), grace_s=30),
                          reconcile=ReconcileSettings(unknown_window_s=0.0, lost_grace_s=600.0))  # fmt: skip
    return Daemon(db, fake, config)


def test_two_sites_share_one_fake_cluster(tmp_path: Path) -> None:
    fake = FakeSlurm()
    stores = [sqlite_database(tmp_path / f"{name}.sqlite") for name in ("production", "staging")]
    try:
        services = [Service(db) for db in stores]
        daemons = [_daemon(db, fake, tmp_path, name) for db, name in zip(stores, ("production", "staging"), strict=True)]
        assert daemons[0].site != daemons[1].site
        jobs = [[s.submit(spec).job.id for spec in (training(), evaluation(), training(name="t2"))] for s in services]
        stray = [_job(fake, d.site, "no-such-attempt") for d in daemons]  # each site's own orphan, as the daemon's user
        for _ in range(30):
            for daemon in daemons:
                assert settled(daemon).error == ""
            fake.advance()
            if all(s.status(j).state == JobState.SUCCEEDED for s, js in zip(services, jobs, strict=True) for j in js):
                break
        for service, daemon, own_stray in zip(services, daemons, stray, strict=True):
            assert [service.status(j).state for j in jobs[services.index(service)]] == [JobState.SUCCEEDED] * 3
            with service.db.session() as session:
                recorded = set(session.scalars(select(Attempt.slurm_job_id)))
            site_jobs = {str(job.job_id) for job in fake.jobs_of_site(daemon.site)} - {str(own_stray.job_id)}
            assert recorded == site_jobs  # each store has exactly its own site's jobs
            assert "job.tag.spoofed" not in _audit(service)
            assert own_stray.state == "CANCELLED"  # each cancelled its own orphan ...
        cancelled = {job_id for job_id, signal in fake.cancels if signal is None}
        assert cancelled == {str(job.job_id) for job in stray}  # ... and nothing else
    finally:
        for db in stores:
            db.dispose()
