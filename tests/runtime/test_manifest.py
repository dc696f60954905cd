"""Inference manifests: build, fenced exactly-once commit, job manifest, staging GC, atomic writes."""

from __future__ import annotations

import hashlib
import json
from datetime import timedelta
from pathlib import Path

import pytest

from checkpoint.manifest import build_manifest, commit, committed, gc_staging, job_manifest, write_atomically
from meta.cycle.launch_plan import staging_dir
from meta.model.durations import utcnow
from meta.model.errors import Conflict, InvalidRequest, StaleFencingToken
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store.lifecycle import attempt_event
from tests.runtime.support import attempt, inference, place, share, submit


def _write(path: Path, data: bytes) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_bytes(data)


def test_build_manifest_lists_sizes_and_sha256(tmp_path: Path) -> None:
    _write(tmp_path / "a.txt", b"hello")
    _write(tmp_path / "sub" / "b.bin", b"\x00" * 1000)
    manifest = build_manifest(tmp_path)
    assert manifest["root"] == str(tmp_path)
    assert manifest["files"] == [
        {"path": "a.txt", "size": 5, "sha256": hashlib.sha256(b"hello").hexdigest()},
        {"path": "sub/b.bin", "size": 1000, "sha256": hashlib.sha256(b"\x00" * 1000).hexdigest()},
    ]
    assert manifest["bytes"] == 1005


def test_build_manifest_of_a_missing_dir_is_invalid(tmp_path: Path) -> None:
    with pytest.raises(InvalidRequest):
        build_manifest(tmp_path / "nope")


def _partition(service: Service, tmp_path: Path, partitions: int = 2):
    spec = inference(str(tmp_path / "out"), partitions=partitions)
    job, tasks = submit(service, spec)
    return spec, job, tasks


MANIFEST = {"root": "/x", "files": [{"path": "part.tsv", "size": 3, "sha256": "ab"}], "bytes": 3}


def test_commit_makes_the_one_visible_output(service: Service, tmp_path: Path) -> None:
    _, job, (t, _) = _partition(service, tmp_path)
    a = place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        row = commit(session, a, 1, MANIFEST)
        assert (row.task_id, row.attempt_id, row.fencing_token, row.job_id) == (t, a, 1, job)
    with service.db.session() as session:
        assert [c.attempt_id for c in committed(session, job)] == [a]


def test_commit_refuses_a_stale_token(service: Service, tmp_path: Path) -> None:
    _, job, (t, _) = _partition(service, tmp_path)
    a = place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING)
    with pytest.raises(StaleFencingToken), service.db.session() as session:
        commit(session, a, 7, MANIFEST)
    with service.db.session() as session:
        assert committed(session, job) == []


def test_commit_refuses_an_attempt_that_is_not_current(service: Service, tmp_path: Path) -> None:
    _, job, (t, _) = _partition(service, tmp_path)
    old = place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        attempt_event(session, old, AttemptState.LOST, "test:lost")
    place(service.db, t, [share("node2", gpus=1)], AttemptState.RUNNING)
    with pytest.raises(StaleFencingToken), service.db.session() as session:
        commit(session, old, 1, MANIFEST)  # a late worker of a lost attempt


def test_commit_refuses_an_expired_lease(service: Service, tmp_path: Path) -> None:
    _, _, (t, _) = _partition(service, tmp_path)
    a = place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING)
    expires = attempt(service.db, a).lease_expires_at
    with pytest.raises(StaleFencingToken), service.db.session() as session:
        commit(session, a, 1, MANIFEST, now=expires + timedelta(seconds=1))
    with service.db.session() as session:
        assert commit(session, a, 1, MANIFEST, now=expires - timedelta(seconds=1)).attempt_id == a


def test_a_second_commit_by_another_attempt_conflicts(service: Service, tmp_path: Path) -> None:
    _, job, (t, _) = _partition(service, tmp_path)
    first = place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        commit(session, first, 1, MANIFEST)
        attempt_event(session, first, AttemptState.LOST, "test:lost-after-commit")
    second = place(service.db, t, [share("node2", gpus=1)], AttemptState.RUNNING)
    with pytest.raises(Conflict), service.db.session() as session:
        commit(session, second, 2, {**MANIFEST, "bytes": 4})
    with service.db.session() as session:
        (only,) = committed(session, job)
        assert only.attempt_id == first and only.manifest == MANIFEST


def test_the_same_commit_repeated_returns_the_same_row(service: Service, tmp_path: Path) -> None:
    _, job, (t, _) = _partition(service, tmp_path)
    a = place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        first = commit(session, a, 1, MANIFEST)
        first_at = first.committed_at
    with service.db.session() as session:
        again = commit(session, a, 1, json.loads(json.dumps(MANIFEST)))
        assert (again.task_id, again.attempt_id, again.committed_at) == (t, a, first_at)
    with pytest.raises(Conflict), service.db.session() as session:
        commit(session, a, 1, {**MANIFEST, "bytes": 99})  # same attempt, different content
    with service.db.session() as session:
        assert len(committed(session, job)) == 1


def test_job_manifest_has_one_entry_per_partition(service: Service, tmp_path: Path) -> None:
    _, job, tasks = _partition(service, tmp_path, partitions=3)
    a = place(service.db, tasks[1], [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        commit(session, a, 1, MANIFEST)
    with service.db.session() as session:
        manifest = job_manifest(session, job)
    assert manifest["job_id"] == job and manifest["complete"] is False
    assert [p["index"] for p in manifest["partitions"]] == [0, 1, 2]
    assert [p["attempt"] for p in manifest["partitions"]] == [None, a, None]
    assert manifest["partitions"][1]["manifest"] == MANIFEST and manifest["partitions"][1]["fencing_token"] == 1
    others = []
    for t in (tasks[0], tasks[2]):
        b = place(service.db, t, [share("node2", gpus=1)], AttemptState.RUNNING)
        others.append(b)
        with service.db.session() as session:
            commit(session, b, 1, MANIFEST)
    with service.db.session() as session:
        manifest = job_manifest(session, job)
    assert manifest["complete"] is True and len(manifest["partitions"]) == 3
    assert [p["attempt"] for p in manifest["partitions"]] == [others[0], a, others[1]]


def test_gc_staging_removes_only_ended_uncommitted_attempts(service: Service, tmp_path: Path) -> None:
    spec, job, (t0, t1) = _partition(service, tmp_path)
    winner = place(service.db, t0, [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        commit(session, winner, 1, MANIFEST)
        attempt_event(session, winner, AttemptState.SUCCEEDED, "test:done")
    loser = place(service.db, t1, [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        attempt_event(session, loser, AttemptState.LOST, "test:lost")
    live = place(service.db, t1, [share("node2", gpus=1)], AttemptState.RUNNING)
    dirs = {name: Path(staging_dir(spec, name)) for name in (winner, loser, live, "not-an-attempt")}
    for path in dirs.values():
        _write(path / "part.tsv", b"abc")
    with service.db.session() as session:
        removed = gc_staging(session, job, spec.output)
    assert removed == [loser]
    assert not dirs[loser].exists()
    assert all(dirs[name].exists() for name in (winner, live, "not-an-attempt"))


def test_gc_staging_without_a_staging_dir_is_a_noop(service: Service, tmp_path: Path) -> None:
    spec, job, _ = _partition(service, tmp_path)
    with service.db.session() as session:
        assert gc_staging(session, job, spec.output) == []


def test_write_atomically_leaves_no_temp_files(tmp_path: Path) -> None:
    target = tmp_path / "out" / "_manifest.json"
    write_atomically(target, {"b": 1, "a": [1, 2]})
    write_atomically(target, {"c": utcnow().isoformat()})  # replaces, never appends
    assert list(target.parent.iterdir()) == [target]
    assert set(json.loads(target.read_text())) == {"c"}


def test_write_atomically_cleans_up_after_a_failed_write(tmp_path: Path) -> None:
    target = tmp_path / "_manifest.json"
    write_atomically(target, {"ok": True})
    with pytest.raises(TypeError):
        write_atomically(target, {"bad": object()})  # not JSON: the write fails midway
    assert list(tmp_path.iterdir()) == [target]
    assert json.loads(target.read_text()) == {"ok": True}
