"""Inference manifests: build, fenced exactly-once commit, job manifest, staging GC, atomic writes."""

from __future__ import annotations

import hashlib
import json
import os
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

import checkpoint.manifest as checkpoint_manifest
from checkpoint.manifest import (
    build_manifest,
    commit,
    commit_many,
    committed,
    gc_staging,
    job_manifest,
    write_atomically,
)
from cli.main import cli
from meta.cycle.actuate.launch_plan import job_output_dir
from meta.model.durations import utcnow
from meta.model.errors import Conflict, InvalidRequest, StaleFencingToken
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store import audit
from meta.store.lifecycle import attempt_event
from meta.store.models import Attempt, Job, PartitionCommit
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


def _folder(service: Service, spec, job: str) -> str:
    """_folder is the job's own output folder, ``<output>/<job id>/``."""
    with service.db.session() as session:
        return job_output_dir(spec, session.get(Job, job).short_id)


def _staging(service: Service, spec, job: str, attempt_id: str) -> Path:
    """_staging is an attempt's staging folder inside its job's output folder."""
    return Path(_folder(service, spec, job)) / "_attempts" / attempt_id


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
    dirs = {name: _staging(service, spec, job, name) for name in (winner, loser, live, "not-an-attempt")}
    for path in dirs.values():
        _write(path / "part.tsv", b"abc")
    with service.db.session() as session:
        removed = gc_staging(session, job, _folder(service, spec, job))
    assert removed == [loser]
    assert not dirs[loser].exists()
    assert all(dirs[name].exists() for name in (winner, live, "not-an-attempt"))


def test_gc_staging_without_a_staging_dir_is_a_noop(service: Service, tmp_path: Path) -> None:
    spec, job, _ = _partition(service, tmp_path)
    with service.db.session() as session:
        assert gc_staging(session, job, _folder(service, spec, job)) == []


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


# --- untrusted output folders (issue 11) -------------------------------------------------------

SHADOW = b"root:$6$very-secret-hash:19000:0:99999:7:::\n"


def _outside_secret(tmp_path: Path) -> Path:
    secret = tmp_path / "etc" / "shadow"
    _write(secret, SHADOW)
    return secret


def test_build_manifest_refuses_a_file_symlink_and_names_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out / "part.tsv", b"rows")
    (out / "sub").mkdir()
    (out / "sub" / "shadow").symlink_to(_outside_secret(tmp_path))
    with pytest.raises(InvalidRequest, match=r"sub/shadow") as refused:
        build_manifest(out)
    assert hashlib.sha256(SHADOW).hexdigest() not in str(refused.value)


def test_build_manifest_refuses_a_folder_symlink_and_names_it(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out / "part.tsv", b"rows")
    _outside_secret(tmp_path)
    (out / "etc").symlink_to(tmp_path / "etc", target_is_directory=True)
    with pytest.raises(InvalidRequest, match=r"'etc'"):
        build_manifest(out)


def test_build_manifest_refuses_a_staging_folder_that_is_a_symlink(tmp_path: Path) -> None:
    _outside_secret(tmp_path)
    (tmp_path / "staging").symlink_to(tmp_path / "etc", target_is_directory=True)
    with pytest.raises(InvalidRequest, match="symlink"):
        build_manifest(tmp_path / "staging")


def test_build_manifest_refuses_special_files(tmp_path: Path) -> None:
    out = tmp_path / "out"
    _write(out / "part.tsv", b"rows")
    os.mkfifo(out / "pipe")
    with pytest.raises(InvalidRequest, match=r"'pipe'"):
        build_manifest(out)  # and never blocks opening the pipe


def test_cli_commit_of_an_output_with_a_symlink_fails_naming_it_and_commits_nothing(
    service: Service, tmp_path: Path
) -> None:
    spec, job, (t, _) = _partition(service, tmp_path)
    a = place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING)
    staging = _staging(service, spec, job, a)
    _write(staging / "part.tsv", b"rows")
    (staging / "shadow").symlink_to(_outside_secret(tmp_path))
    result = CliRunner().invoke(
        cli,
        ["commit", "--attempt", a, "--token", "1"],
        env={"METASCHED_DB": service.db.url, "METASCHED_OUTPUT_DIR": str(staging), "METASCHED_TENANT": None},
        prog_name="metasched",
    )
    assert result.exit_code == 2 and "shadow" in result.stderr and result.stderr.count("\n") == 1
    assert "Traceback" not in result.output
    with service.db.session() as session:
        assert committed(session, job) == [] and audit.read(session) == []


def test_an_output_commit_is_audited_once(service: Service, tmp_path: Path) -> None:
    _, job, (t, _) = _partition(service, tmp_path)
    a = place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        commit(session, a, 1, MANIFEST, actor="alice")
    with service.db.session() as session:
        commit(session, a, 1, MANIFEST, actor="alice")  # the same commit retried: no second line
    with service.db.session() as session:
        events = audit.read(session)
        short_id = session.get(Job, job).short_id
    assert [(e.actor, e.action, e.tenant, e.subject) for e in events] == [("alice", "output.commit", "acme", short_id)]
    assert events[0].detail == {"partition": 0, "attempt": a, "fencing_token": 1, "files": 1, "bytes": 3}


def test_the_daemon_commit_on_success_is_audited_as_the_scheduler(service: Service, tmp_path: Path) -> None:
    _, _, (t, _) = _partition(service, tmp_path)
    a = place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        commit(session, a, 1, MANIFEST)
    with service.db.session() as session:
        assert [(e.actor, e.action) for e in audit.read(session)] == [("scheduler", "output.commit")]


def test_gc_staging_never_follows_a_symlinked_staging_folder(service: Service, tmp_path: Path) -> None:
    spec, job, (t0, _) = _partition(service, tmp_path)
    loser = place(service.db, t0, [share("node1", gpus=1)], AttemptState.RUNNING)
    with service.db.session() as session:
        attempt_event(session, loser, AttemptState.LOST, "test:lost")
    elsewhere = tmp_path / "elsewhere"
    _write(elsewhere / loser / "keep.tsv", b"abc")
    Path(_folder(service, spec, job)).mkdir(parents=True)
    (Path(_folder(service, spec, job)) / "_attempts").symlink_to(elsewhere, target_is_directory=True)
    with service.db.session() as session:
        assert gc_staging(session, job, _folder(service, spec, job)) == []
    assert (elsewhere / loser / "keep.tsv").read_bytes() == b"abc"


def test_commit_many_makes_the_commits_and_audit_lines_of_one_commit_each(service: Service, tmp_path: Path) -> None:
    """A group commit: a new partition committed, the same commit again returned, a different one a Conflict."""
    _, job, tasks = _partition(service, tmp_path, partitions=4)
    ids = [place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING) for t in tasks]
    with service.db.session() as session:
        commit(session, ids[1], 1, MANIFEST)  # already committed, by the same attempt
        commit(session, ids[3], 1, MANIFEST)
    other = {**MANIFEST, "bytes": 4}
    with service.db.session() as session:
        rows = {a: session.get(Attempt, a) for a in ids}
        wanted = [(rows[ids[0]], MANIFEST), (rows[ids[1]], MANIFEST), (rows[ids[3]], other)]
        out = commit_many(session, wanted)
        assert out[ids[0]].attempt_id == ids[0] and out[ids[1]].attempt_id == ids[1]
        assert isinstance(out[ids[3]], Conflict)
    with service.db.session() as session:
        assert sorted(c.attempt_id for c in committed(session, job)) == sorted([ids[0], ids[1], ids[3]])
        lines = [e for e in audit.read(session) if e.action == "output.commit"]
        assert sorted(e.detail["attempt"] for e in lines) == sorted([ids[0], ids[1], ids[3]])  # one line per first commit


def test_commit_many_refuses_what_commit_refuses(service: Service, tmp_path: Path) -> None:
    """An attempt whose lease expired, or that is no longer live, is refused in the group as it is alone."""
    _, job, tasks = _partition(service, tmp_path, partitions=2)
    ids = [place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING) for t in tasks]
    with service.db.session() as session:
        rows = [session.get(Attempt, a) for a in ids]
        rows[0].lease_expires_at = utcnow() - timedelta(seconds=1)
        session.flush()
        out = commit_many(session, [(rows[0], MANIFEST), (rows[1], MANIFEST)])
        assert isinstance(out[ids[0]], StaleFencingToken)
        assert out[ids[1]].attempt_id == ids[1]


def test_commit_many_falls_back_when_a_concurrent_commit_won(pg_service: Service, tmp_path: Path) -> None:
    """A commit made by another transaction after the group read the commits: the group goes one by one, that one a Conflict.

    PostgreSQL only: SQLite serialises writers, so no other transaction can commit in between.
    """
    service = pg_service
    _, job, tasks = _partition(service, tmp_path, partitions=2)
    ids = [place(service.db, t, [share("node1", gpus=1)], AttemptState.RUNNING) for t in tasks]
    with service.db.session() as session:
        rows = [session.get(Attempt, a) for a in ids]
        real = checkpoint_manifest.check_current

        def racing(*args, **kwargs):  # another transaction commits partition 0 while the group checks
            with service.db.session() as other:
                if other.get(PartitionCommit, tasks[0]) is None:
                    commit(other, ids[0], 1, {**MANIFEST, "bytes": 9})
            return real(*args, **kwargs)

        checkpoint_manifest.check_current = racing
        try:
            out = commit_many(session, [(rows[0], MANIFEST), (rows[1], MANIFEST)])
        finally:
            checkpoint_manifest.check_current = real
        assert isinstance(out[ids[0]], Conflict)
        assert out[ids[1]].attempt_id == ids[1]
    with service.db.session() as session:
        assert {c.task_id: c.manifest["bytes"] for c in committed(session, job)} == {tasks[0]: 9, tasks[1]: 3}
