"""outputs: the reconciler commits a succeeded inference attempt's staging dir unless it committed itself.

The staging folder is read off the period (OutputWorkers): a reconcile hands it over, the next
one commits what the workers found; ``_reconcile`` runs both, waiting for the workers between.
"""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path

from checkpoint.manifest import commit, committed
from checkpoint.owner_workers import OutputWorkers
from meta.cycle.outputs import Finalizing, commit_on_success
from meta.cycle.reconcile import Reconciler, observe
from meta.cycle.snapshot.build import SpecCache
from meta.model.states import AttemptState, TaskState
from meta.service.api import Service
from meta.store.lifecycle import attempt_event
from meta.store.models import Attempt, Job, PartitionCommit
from slurm_bridge.fake import FakeSlurm
from tests.runtime.output_partition import finalize
from tests.runtime.support import attempt, inference, lead, place, share, submit, task, training


def _running_partition(service: Service, fake: FakeSlurm, spec, task_id: str) -> tuple[str, int]:
    a = place(service.db, task_id, [share("node1", gpus=1)], AttemptState.RUNNING)
    job = fake.add_job(f"ms-{a}", f"metasched:attempt={a}:token=1")
    with service.db.session() as session:
        session.get(Attempt, a).slurm_job_id = str(job.job_id)
    return a, job.job_id


def _folder(service: Service, job: str, tmp_path: Path) -> Path:
    """_folder is the job's own output folder, ``<output>/<job id>/``."""
    with service.db.session() as session:
        return tmp_path / "out" / session.get(Job, job).short_id


def _reconciler(service: Service, fake: FakeSlurm, workers: OutputWorkers | None = None) -> Reconciler:
    specs, workers = SpecCache(), workers or OutputWorkers()
    hook = lambda session, a: commit_on_success(session, a, specs, workers)  # noqa: E731 - read once below
    return Reconciler(service.db, fake, on_success=hook)


def _reconcile(service: Service, fake: FakeSlurm) -> None:
    """_reconcile hands a finished partition's folder to the workers, waits for them, and reconciles again."""
    workers = OutputWorkers()
    reconciler = _reconciler(service, fake, workers)
    leadership = lead(service.db)
    reconciler.apply(observe(fake, reconciler.since(), site=reconciler.site), leadership)
    assert workers.wait_idle(30)
    reconciler.apply(observe(fake, reconciler.since(), site=reconciler.site), leadership)
    workers.close()


def test_succeeded_inference_attempt_is_committed_from_its_staging_dir(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    spec = inference(str(tmp_path / "out"))
    job, (t0, _) = submit(service, spec)
    a, slurm_id = _running_partition(service, fake, spec, t0)
    staging = _folder(service, job, tmp_path) / "_attempts" / a
    staging.mkdir(parents=True)
    (staging / "part.tsv").write_bytes(b"rows\n")
    fake.finish(slurm_id)
    _reconcile(service, fake)
    assert attempt(service.db, a).state == AttemptState.SUCCEEDED.value
    with service.db.session() as session:
        (row,) = committed(session, job)
    assert row.task_id == t0 and row.attempt_id == a and row.fencing_token == 1
    assert row.manifest["files"] == [{"path": "part.tsv", "size": 5, "sha256": hashlib.sha256(b"rows\n").hexdigest()}]


def test_an_attempt_that_committed_itself_is_not_recommitted(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    spec = inference(str(tmp_path / "out"))
    job, (t0, _) = submit(service, spec)
    a, slurm_id = _running_partition(service, fake, spec, t0)
    own = {"root": "custom", "files": [], "bytes": 0, "note": "committed by the job"}
    with service.db.session() as session:
        commit(session, a, 1, own)
    staging = _folder(service, job, tmp_path) / "_attempts" / a
    staging.mkdir(parents=True)
    (staging / "extra.tsv").write_text("x")
    fake.finish(slurm_id)
    _reconcile(service, fake)
    assert attempt(service.db, a).state == AttemptState.SUCCEEDED.value
    with service.db.session() as session:
        (row,) = committed(session, job)
    assert row.manifest == own


def test_missing_staging_dir_commits_an_empty_manifest(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    spec = inference(str(tmp_path / "out"))
    job, (t0, _) = submit(service, spec)
    a, slurm_id = _running_partition(service, fake, spec, t0)
    fake.finish(slurm_id)
    _reconcile(service, fake)
    with service.db.session() as session:
        (row,) = committed(session, job)
    assert row.attempt_id == a and row.manifest["files"] == [] and row.manifest["bytes"] == 0


def test_training_attempts_commit_nothing(service: Service) -> None:
    _, (t,) = submit(service, training())
    a = place(service.db, t, [share("node1")], AttemptState.RUNNING)
    with service.db.session() as session:
        assert commit_on_success(session, session.get(Attempt, a), SpecCache(), OutputWorkers()) is None
        assert session.get(PartitionCommit, t) is None


def test_finalize_writes_the_job_manifest_and_collects_stale_staging(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    spec = inference(str(tmp_path / "out"))
    job, tasks = submit(service, spec)
    done = Finalizing()
    assert finalize(service, done) == []  # not finished yet
    stale = place(service.db, tasks[0], [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        attempt_event(session, stale, AttemptState.LOST, "test:lost")
    (_folder(service, job, tmp_path) / "_attempts" / stale).mkdir(parents=True)
    winners = []
    for t in tasks:
        a, slurm_id = _running_partition(service, fake, spec, t)
        winners.append(a)
        fake.finish(slurm_id)
    _reconcile(service, fake)
    assert all(task(service.db, t).state == TaskState.SUCCEEDED.value for t in tasks)
    assert finalize(service, done) == [job]
    manifest = json.loads((_folder(service, job, tmp_path) / "_manifest.json").read_text())
    assert manifest["complete"] is True
    assert [p["attempt"] for p in manifest["partitions"]] == winners
    assert not (_folder(service, job, tmp_path) / "_attempts" / stale).exists()
    assert finalize(service, done) == []  # written once


def test_two_jobs_with_one_output_folder_never_share_a_file(service: Service, tmp_path: Path) -> None:
    # two msbatch jobs from one folder get the same output: each keeps its own staging and manifest
    fake = FakeSlurm()
    spec = inference(str(tmp_path / "out"), partitions=1)
    jobs = []
    for content in (b"first\n", b"second\n"):
        job, (t0,) = submit(service, spec)
        a, slurm_id = _running_partition(service, fake, spec, t0)
        staging = _folder(service, job, tmp_path) / "_attempts" / a
        staging.mkdir(parents=True)
        (staging / "part.tsv").write_bytes(content)
        fake.finish(slurm_id)
        _reconcile(service, fake)
        jobs.append((job, a))
    assert sorted(finalize(service, Finalizing())) == sorted(job for job, _ in jobs)
    assert not (tmp_path / "out" / "_manifest.json").exists() and not (tmp_path / "out" / "_attempts").exists()
    for (job, a), content in zip(jobs, (b"first\n", b"second\n"), strict=True):
        manifest = json.loads((_folder(service, job, tmp_path) / "_manifest.json").read_text())
        (partition,) = manifest["partitions"]
        assert partition["attempt"] == a
        assert (_folder(service, job, tmp_path) / "_attempts" / a / "part.tsv").read_bytes() == content


def _committed_partition(service: Service, fake: FakeSlurm, tmp_path: Path) -> tuple[str, str, int]:
    spec = inference(str(tmp_path / "out"), retry={"on": ["user_error", "lost", "preempted"], "backoff": 0})
    _, (t0, _) = submit(service, spec)
    a, slurm_id = _running_partition(service, fake, spec, t0)
    with service.db.session() as session:
        commit(session, a, 1, {"root": "r", "files": [], "bytes": 0})
    return t0, a, slurm_id


def test_a_committed_attempt_that_then_fails_ends_succeeded(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    t0, a, slurm_id = _committed_partition(service, fake, tmp_path)
    fake.finish(slurm_id, "FAILED", 1)  # e.g. the program crashed while cleaning up after its commit
    _reconcile(service, fake)
    assert attempt(service.db, a).state == AttemptState.SUCCEEDED.value
    assert task(service.db, t0).state == TaskState.SUCCEEDED.value


def test_a_committed_attempt_stopped_for_preemption_ends_succeeded(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    t0, a, slurm_id = _committed_partition(service, fake, tmp_path)
    with service.db.session() as session:
        attempt_event(session, a, AttemptState.STOPPING, "test:preempt", values={"stop_reason": "preempt"})
    fake.cancel([slurm_id])
    _reconcile(service, fake)
    assert attempt(service.db, a).state == AttemptState.SUCCEEDED.value
    assert task(service.db, t0).state == TaskState.SUCCEEDED.value


def test_a_committed_attempt_slurm_forgot_ends_succeeded_not_lost(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    t0, a, slurm_id = _committed_partition(service, fake, tmp_path)
    del fake.jobs[slurm_id]
    reconciler = _reconciler(service, fake)
    observation = observe(fake, reconciler.since(), site=reconciler.site)
    observation.at = observation.at + timedelta(seconds=reconciler.settings.lost_grace_s + 1)
    result = reconciler.apply(observation, lead(service.db))
    assert result.lost == []
    assert attempt(service.db, a).state == AttemptState.SUCCEEDED.value
    assert task(service.db, t0).state == TaskState.SUCCEEDED.value


def test_an_uncommitted_attempt_that_fails_is_not_succeeded(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    spec = inference(str(tmp_path / "out"), retry={"on": ["user_error"], "backoff": 0})
    _, (t0, _) = submit(service, spec)
    a, slurm_id = _running_partition(service, fake, spec, t0)
    fake.finish(slurm_id, "FAILED", 1)
    _reconcile(service, fake)
    assert attempt(service.db, a).state == AttemptState.FAILED.value
    assert task(service.db, t0).state == TaskState.PENDING.value
    with service.db.session() as session:
        assert session.get(PartitionCommit, t0) is None


def test_a_partition_whose_output_is_being_read_stays_live_without_a_second_path(service: Service, tmp_path: Path) -> None:
    """The bulk path asks at most twice (handing the folder over, then once more), keeps it live with its sighting renewed."""
    fake = FakeSlurm()
    spec = inference(str(tmp_path / "out"))
    job, (t0, _) = submit(service, spec)
    a, slurm_id = _running_partition(service, fake, spec, t0)
    fake.finish(slurm_id)
    calls: list[str] = []
    workers = OutputWorkers()
    specs = SpecCache()

    def hook(session, attempt_row):
        calls.append(attempt_row.id)
        return commit_on_success(session, attempt_row, specs, workers)

    reconciler = Reconciler(service.db, fake, on_success=hook)
    leadership = lead(service.db)
    result = reconciler.apply(observe(fake, reconciler.since(), site=reconciler.site), leadership)
    assert calls in ([a], [a, a])  # never a third time on the one-by-one path
    if attempt(service.db, a).state == AttemptState.SUCCEEDED.value:
        return  # the workers read the empty folder between the two asks: committed at once
    assert result.transitions == 0
    assert attempt(service.db, a).last_seen_at is not None
    assert workers.wait_idle(30)
    reconciler.apply(observe(fake, reconciler.since(), site=reconciler.site), leadership)
    workers.close()
    assert attempt(service.db, a).state == AttemptState.SUCCEEDED.value
