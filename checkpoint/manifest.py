"""Exactly-once inference outputs: attempt-private staging, then one atomic manifest commit.

Each partition attempt writes under ``<output>/<job id>/_attempts/<attempt>/`` and commits a manifest
(files, sizes, sha256) carrying its fencing token. The commit table's primary key is the task,
so a partition has at most one visible output (I1); only the task's current attempt, within its
lease, may commit. A late or duplicate worker is refused and its staging is garbage-collected.
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Sequence
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from checkpoint.fencing import check_current, current_attempt
from checkpoint.manifest_files import build_manifest
from meta.model.durations import utcnow
from meta.model.errors import Conflict, MetaschedError, NotFound
from meta.model.states import LIVE_ATTEMPT_STATES
from meta.store import audit
from meta.store.chunks import among, chunked
from meta.store.models import Attempt, Job, PartitionCommit, Task

STAGING = "_attempts"
JOB_MANIFEST = "_manifest.json"

__all__ = ["JOB_MANIFEST", "STAGING", "build_manifest", "commit", "commit_many", "committed", "gc_staging", "job_manifest",
           "write_atomically"]


def commit(
    session: Session,
    attempt_id: str,
    token: int,
    manifest: dict[str, Any],
    now: datetime | None = None,
    *,
    actor: str = "scheduler",
) -> PartitionCommit:
    """commit makes an attempt's manifest the partition's one visible output (idempotent per attempt).

    The first commit is audited (``output.commit``, by ``actor``: the caller of ``metasched
    commit``, or the scheduler committing a succeeded attempt's staging dir); a retried identical
    commit returns the same row and adds no line.
    """
    moment = now or utcnow()
    attempt = current_attempt(session, attempt_id, token, moment, need_lease=True)
    existing = _existing(session.get(PartitionCommit, attempt.task_id), attempt.id, manifest)
    if existing is not None:
        return existing  # the same commit again: a retried call, same result
    row = _new_row(attempt, manifest, moment)  # its token is ``token``: current_attempt checked it
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError as exc:  # a concurrent commit for the same partition won
        raise Conflict("partition already committed by a concurrent attempt") from exc
    _audit_commit(session, actor, attempt, row)
    return row


def commit_many(
    session: Session, wanted: Sequence[tuple[Attempt, dict[str, Any]]], now: datetime | None = None, *,
    actor: str = "scheduler",
) -> dict[str, PartitionCommit | MetaschedError]:
    """commit_many is ``commit`` for a group of attempts (each with its own token), in a few statements.

    The same checks and the same rows and audit lines as one ``commit`` each, but the live
    attempts and existing commits are read once for the group and the rows inserted in one
    savepoint (issue 24: 2,000 ended partitions cost ~12 s one by one). If a concurrent commit
    won one of them, the group falls back to one ``commit`` each. Per attempt: its commit, or
    the error ``commit`` would have raised.
    """
    moment = now or utcnow()
    task_ids = sorted({attempt.task_id for attempt, _ in wanted})
    live: dict[str, str] = {}
    existing: dict[str, PartitionCommit] = {}
    for chunk in chunked(task_ids):
        rows = session.execute(select(Attempt.task_id, Attempt.id).where(
            among(session, Attempt.task_id, chunk), Attempt.state.in_([s.value for s in LIVE_ATTEMPT_STATES])))
        live.update((task_id, attempt_id) for task_id, attempt_id in rows)
        existing.update((c.task_id, c) for c in session.scalars(
            select(PartitionCommit).where(among(session, PartitionCommit.task_id, chunk))))  # fmt: skip
    out: dict[str, PartitionCommit | MetaschedError] = {}
    new: list[tuple[Attempt, PartitionCommit]] = []
    for attempt, manifest in wanted:
        try:
            check_current(attempt, attempt.fencing_token, live.get(attempt.task_id), moment, need_lease=True)
            again = _existing(existing.get(attempt.task_id), attempt.id, manifest)
        except MetaschedError as exc:
            out[attempt.id] = exc
            continue
        if again is not None:
            out[attempt.id] = again
        else:
            new.append((attempt, _new_row(attempt, manifest, moment)))
    try:
        with session.begin_nested():
            session.add_all([row for _, row in new])
            session.flush()
    except IntegrityError:  # a concurrent commit for one of the partitions won: each on its own
        return out | _one_by_one(session, new, moment, actor)
    for attempt, row in new:
        _audit_commit(session, actor, attempt, row)
        out[attempt.id] = row
    return out


def _new_row(attempt: Attempt, manifest: dict[str, Any], moment: datetime) -> PartitionCommit:
    """_new_row is the commit row of a checked attempt, under its own fencing token."""
    return PartitionCommit(task_id=attempt.task_id, job_id=attempt.job_id, attempt_id=attempt.id,
                           fencing_token=attempt.fencing_token, manifest=manifest, committed_at=moment)


def _existing(row: PartitionCommit | None, attempt_id: str, manifest: dict[str, Any]) -> PartitionCommit | None:
    """_existing is the partition's commit if it is this very one again (None: none yet); another's is a Conflict."""
    if row is None or (row.attempt_id == attempt_id and row.manifest == manifest):
        return row
    raise Conflict(f"partition already committed by attempt {row.attempt_id}")


def _one_by_one(session: Session, new: list[tuple[Attempt, PartitionCommit]], moment: datetime,
                actor: str) -> dict[str, PartitionCommit | MetaschedError]:
    """_one_by_one commits each attempt on its own (commit_many's fallback)."""
    out: dict[str, PartitionCommit | MetaschedError] = {}
    for attempt, row in new:
        try:
            out[attempt.id] = commit(session, attempt.id, attempt.fencing_token, row.manifest, moment, actor=actor)
        except MetaschedError as exc:
            out[attempt.id] = exc
    return out


def _audit_commit(session: Session, actor: str, attempt: Attempt, row: PartitionCommit) -> None:
    """_audit_commit records one partition commit: ids and counts only, never file contents."""
    job = session.get(Job, attempt.job_id)
    task = session.get(Task, attempt.task_id)
    assert job is not None and task is not None
    files = row.manifest.get("files") or []
    audit.record(
        session,
        actor,
        "output.commit",
        job.short_id,
        tenant=job.tenant,
        partition=task.index,
        attempt=attempt.id,
        fencing_token=row.fencing_token,
        files=len(files),
        bytes=row.manifest.get("bytes", 0),
    )


def committed(session: Session, job_id: str) -> list[PartitionCommit]:
    """committed lists a job's committed partition outputs."""
    return list(session.scalars(select(PartitionCommit).where(PartitionCommit.job_id == job_id)))


def job_manifest(session: Session, job_id: str) -> dict[str, Any]:
    """job_manifest has exactly one entry per partition (None where nothing is committed yet)."""
    job = session.get(Job, job_id)
    if job is None:
        raise NotFound(f"job {job_id} not found")
    commits = {c.task_id: c for c in committed(session, job_id)}
    tasks = session.scalars(select(Task).where(Task.job_id == job_id).order_by(Task.index))
    partitions = []
    for task in tasks:
        c = commits.get(task.id)
        partitions.append(
            {
                "index": task.index,
                "name": task.name,
                "attempt": c.attempt_id if c else None,
                "fencing_token": c.fencing_token if c else None,
                "committed_at": c.committed_at.isoformat() if c else None,
                "manifest": c.manifest if c else None,
            }
        )
    complete = all(p["attempt"] for p in partitions)
    return {"job": job.short_id, "job_id": job.id, "complete": complete, "partitions": partitions}


def write_atomically(path: Path, data: dict[str, Any]) -> None:
    """write_atomically writes JSON to a temp file, fsyncs it and renames it into place."""
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, temp = tempfile.mkstemp(prefix=".manifest-", dir=path.parent)
    try:
        with os.fdopen(fd, "w", encoding="utf-8") as handle:
            json.dump(data, handle, indent=2, sort_keys=True)
            handle.flush()
            os.fsync(handle.fileno())
        os.replace(temp, path)
    except BaseException:
        Path(temp).unlink(missing_ok=True)
        raise


def gc_staging(session: Session, job_id: str, output_dir: str | Path) -> list[str]:
    """gc_staging removes staging dirs of ended attempts whose output is not the committed one."""
    root = Path(output_dir) / STAGING
    if root.is_symlink() or not root.is_dir():
        return []  # a linked staging folder is not ours to delete in
    keep = {c.attempt_id for c in committed(session, job_id)}
    attempts = {a.id: a.state for a in session.scalars(select(Attempt).where(Attempt.job_id == job_id))}
    removed = []
    for entry in root.iterdir():
        state = attempts.get(entry.name)
        if state is None or entry.name in keep or state in {s.value for s in LIVE_ATTEMPT_STATES}:
            continue  # not ours, committed, or still running: leave it
        shutil.rmtree(entry, ignore_errors=True)
        removed.append(entry.name)
    return removed
