"""Outputs read off the period (issue 22, S2 and S6): caps on files, bytes and seconds; no symlink followed.

The reconciler hands a finished partition's staging folder to ``OutputWorkers`` and never waits:
the attempt stays live until the answer is in. Over a cap, or through a symlink, the partition
fails with the reason; the job manifest is never written through a symlinked job folder.
"""

from __future__ import annotations

import json
import os
import time
from pathlib import Path

from sqlalchemy import select

from checkpoint.manifest import committed
from checkpoint.owner_workers import Answer, OutputCaps, OutputWorkers, Owner
from meta.cycle.outputs import Finalizing, finalize_jobs
from meta.cycle.snapshot.build import SpecCache
from meta.model.durations import utcnow
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.lifecycle import attempt_event
from meta.store.models import Job, Task
from tests.runtime.output_partition import GIB, Partition
from tests.runtime.support import inference, place, share


def test_a_huge_sparse_file_fails_the_partition_with_its_reason_quickly(
    service: Service, tmp_path: Path
) -> None:
    part = Partition(service, tmp_path / "out")
    part.staging.mkdir(parents=True)
    with (part.staging / "big").open("wb") as handle:
        handle.truncate(4 * GIB)  # free to make: no block is written
    part.fake.finish(part.slurm_id)
    assert part.reconcile() < 2.0
    assert part.state() == AttemptState.RUNNING.value  # handed over: live until the answer is in
    started = time.monotonic()
    assert part.workers.wait_idle(30)
    assert time.monotonic() - started < 5.0  # refused by its size, never read
    part.reconcile()
    category, reason = part.failure()
    assert category == "user_error" and f"more than {GIB} bytes" in reason and "'big'" in reason
    assert "metasched commit" in reason  # what to do instead
    with service.db.session() as session:
        assert committed(session, part.job) == []


def test_too_many_files_fail_the_partition(service: Service, tmp_path: Path) -> None:
    part = Partition(service, tmp_path / "out", OutputCaps(max_files=50))
    (part.staging / "sub").mkdir(parents=True)
    for i in range(60):
        (part.staging / "sub" / f"f{i}").write_bytes(b"x")
    part.fake.finish(part.slurm_id)
    part.reconcile()
    assert part.workers.wait_idle(30)
    part.reconcile()
    assert "more than 50 files" in part.failure()[1]


def test_a_slow_folder_is_cut_at_the_time_cap_and_the_period_never_waits(
    service: Service, tmp_path: Path
) -> None:
    part = Partition(service, tmp_path / "out", OutputCaps(max_bytes=64 * GIB, max_seconds=1.0))
    part.staging.mkdir(parents=True)
    with (part.staging / "big").open("wb") as handle:
        handle.truncate(16 * GIB)  # under the bytes cap: it would be read for about a minute
    part.fake.finish(part.slurm_id)
    periods = []
    deadline = time.monotonic() + 20
    while part.state() == AttemptState.RUNNING.value and time.monotonic() < deadline:
        periods.append(part.reconcile())
        time.sleep(0.2)
    assert max(periods) < 2.0, periods  # each pass only looked for the answer
    assert "over 1 s, the cap" in part.failure()[1]


def test_within_the_caps_the_partition_is_committed_as_before(service: Service, tmp_path: Path) -> None:
    part = Partition(service, tmp_path / "out")
    part.staging.mkdir(parents=True)
    (part.staging / "rows.tsv").write_bytes(b"a\tb\n")
    part.fake.finish(part.slurm_id)
    part.reconcile()
    assert part.workers.wait_idle(30)
    part.reconcile()
    assert part.state() == AttemptState.SUCCEEDED.value
    with service.db.session() as session:
        (row,) = committed(session, part.job)
    assert [f["path"] for f in row.manifest["files"]] == ["rows.tsv"] and row.manifest["bytes"] == 4


def test_a_symlinked_job_folder_is_refused_and_nothing_is_read_through_it(
    service: Service, tmp_path: Path
) -> None:
    part = Partition(service, tmp_path / "out")
    elsewhere = tmp_path / "elsewhere"
    (elsewhere / "_attempts" / part.attempt).mkdir(parents=True)
    (elsewhere / "_attempts" / part.attempt / "secret.txt").write_bytes(b"not the job's")
    part.folder.parent.mkdir(parents=True)
    part.folder.symlink_to(elsewhere, target_is_directory=True)
    part.fake.finish(part.slurm_id)
    part.reconcile()
    assert part.workers.wait_idle(30)
    part.reconcile()
    assert "symlink" in part.failure()[1]
    with service.db.session() as session:
        assert committed(session, part.job) == []


def _finalize(service: Service, state: Finalizing, workers: OutputWorkers) -> list[str]:
    with service.db.session() as session:
        finalize_jobs(session, SpecCache(), state, workers)
    assert workers.wait_idle(30)
    with service.db.session() as session:
        return finalize_jobs(session, SpecCache(), state, workers)


def test_the_job_manifest_is_never_written_through_a_symlinked_job_folder(
    service: Service, tmp_path: Path
) -> None:
    spec = inference(str(tmp_path / "out"), partitions=1)
    job = service.submit(spec).job.id
    with service.db.session() as session:
        short_id = session.get(Job, job).short_id
    _finish_every_task(service, job)
    target = tmp_path / "target"
    target.mkdir()
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / short_id).symlink_to(target, target_is_directory=True)
    workers = OutputWorkers()
    assert _finalize(service, Finalizing(), workers) == []
    assert os.listdir(target) == []  # no manifest, no temp file where the link points
    (tmp_path / "out" / short_id).unlink()
    assert _finalize(service, Finalizing(), workers) == []  # the refusal stays the answer for a while
    assert _finalize(service, Finalizing(), OutputWorkers()) == [job]  # a fresh look writes it
    written = tmp_path / "out" / short_id / "_manifest.json"
    assert not written.is_symlink() and json.loads(written.read_text())["job"] == short_id


def _finish_every_task(service: Service, job: str) -> None:
    """_finish_every_task makes every task of the job succeed through an attempt, as the reconciler would."""
    with service.db.session() as session:
        tasks = list(session.scalars(select(Task.id).where(Task.job_id == job)))
    for task_id in tasks:
        a = place(service.db, task_id, [share("node1", gpus=1)], AttemptState.RUNNING)
        with service.db.session() as session:
            attempt_event(session, a, AttemptState.SUCCEEDED, "test:done")


def test_closing_the_workers_kills_a_child_under_way(tmp_path: Path) -> None:
    staging = tmp_path / "out" / "job" / "_attempts" / "a1"
    staging.mkdir(parents=True)
    with (staging / "big").open("wb") as handle:
        handle.truncate(16 * GIB)  # under the bytes cap below: about a minute of reading
    workers = OutputWorkers(OutputCaps(max_bytes=64 * GIB, max_seconds=120))
    workers.submit("scan:a1", {"action": "scan", "output": str(tmp_path / "out"), "job": "job", "attempt": "a1"},
                   Owner())  # fmt: skip
    time.sleep(0.5)
    started = time.monotonic()
    workers.close()
    assert (
        workers.wait_idle(10) and time.monotonic() - started < 5.0
    )  # a daemon stopping does not wait a minute
    answer = workers.result("scan:a1")
    assert answer is not None and not answer.ok


def test_owners_are_served_in_turn_so_one_users_backlog_does_not_hold_anothers() -> None:
    order: list[int | None] = []

    def slow(request: dict, owner: Owner, timeout_s: float) -> Answer:
        time.sleep(0.05)
        order.append(owner.uid)
        return Answer(True, {})

    workers = OutputWorkers(OutputCaps(workers=1), runner=slow)
    for n in range(8):
        workers.submit(f"scan:mallory-{n}", {"action": "scan"}, Owner(2006, 2006))
    workers.submit("scan:alice", {"action": "scan"}, Owner(2001, 2001))
    assert workers.wait_idle(10)
    assert order.index(2001) <= 2, order  # after at most the two of mallory's already taken, not eight
    assert workers.result("scan:alice") == Answer(True, {})
    workers.close()


def test_answers_nobody_picked_up_expire_oldest_first(monkeypatch) -> None:  # noqa: ANN001
    """An answer is kept _KEEP_S seconds; then it goes, and the same key may be asked again."""
    import checkpoint.owner_workers as owner_workers

    clock = [1000.0]
    monkeypatch.setattr(owner_workers.time, "monotonic", lambda: clock[0])
    workers = OutputWorkers(runner=lambda request, owner, timeout_s: Answer(True, {"n": request["n"]}))
    for n in range(3):
        workers.submit(f"k{n}", {"n": n}, Owner())
        assert workers.wait_idle(10)
        clock[0] += 100.0  # answers at 1000, 1100, 1200
    clock[0] = 1000.0 + owner_workers._KEEP_S + 150.0  # k0 and k1 are older than the keep
    workers.submit("k3", {"n": 3}, Owner())
    assert workers.wait_idle(10)
    assert workers.result("k0") is None and workers.result("k1") is None
    assert workers.result("k2").data == {"n": 2} and workers.result("k3").data == {"n": 3}
    workers.submit("k0", {"n": 10}, Owner())  # expired: asked again, answered again
    assert workers.wait_idle(10) and workers.result("k0").data == {"n": 10}
    workers.close()


def test_a_period_looks_only_at_jobs_with_a_success_since_it_last_looked(service: Service, tmp_path: Path) -> None:
    """finalize_jobs with ``since``: jobs finished before it are not looked at again, unfinished ones never."""
    older = service.submit(inference(str(tmp_path / "out"), partitions=2)).job.id
    _finish_every_task(service, older)
    since = utcnow()
    newer = service.submit(inference(str(tmp_path / "out"), partitions=2)).job.id
    _finish_every_task(service, newer)
    unfinished = service.submit(inference(str(tmp_path / "out"), partitions=2)).job.id
    with service.db.session() as session:
        first = session.scalars(select(Task.id).where(Task.job_id == unfinished)).first()
    a = place(service.db, first, [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        attempt_event(session, a, AttemptState.SUCCEEDED, "test:done")  # one of its two tasks
    state, workers = Finalizing(), OutputWorkers()
    with service.db.session() as session:
        finalize_jobs(session, SpecCache(), state, workers, since)
    assert state.handed == {newer}
    state.done.add(newer)
    state.handed.clear()
    with service.db.session() as session:
        finalize_jobs(session, SpecCache(), state, workers, since)
    assert state.handed == set()  # done is done
    everything = Finalizing()
    with service.db.session() as session:
        finalize_jobs(session, SpecCache(), everything, workers)  # no since: every finished job
    assert everything.handed == {older, newer}
    assert workers.wait_idle(30)
    workers.close()
