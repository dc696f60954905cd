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
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from checkpoint.fencing import current_attempt
from checkpoint.manifest_files import build_manifest
from meta.model.durations import utcnow
from meta.model.errors import Conflict, NotFound
from meta.model.states import LIVE_ATTEMPT_STATES
from meta.store import audit
from meta.store.models import Attempt, Job, PartitionCommit, Task

STAGING = "_attempts"
JOB_MANIFEST = "_manifest.json"

__all__ = ["JOB_MANIFEST", "STAGING", "build_manifest", "commit", "committed", "gc_staging", "job_manifest",
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
    existing = session.get(PartitionCommit, attempt.task_id)
    if existing is not None:
        if existing.attempt_id == attempt.id and existing.manifest == manifest:
            return existing  # the same commit again: a retried call, same result
        raise Conflict(f"partition already committed by attempt {existing.attempt_id}")
    row = PartitionCommit(
        task_id=attempt.task_id,
        job_id=attempt.job_id,
        attempt_id=attempt.id,
        fencing_token=token,
        manifest=manifest,
        committed_at=moment,
    )
    try:
        with session.begin_nested():
            session.add(row)
            session.flush()
    except IntegrityError as exc:  # a concurrent commit for the same partition won
        raise Conflict("partition already committed by a concurrent attempt") from exc
    _audit_commit(session, actor, attempt, row)
    return row


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
