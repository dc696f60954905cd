"""Exactly-once inference outputs: attempt-private staging, then one atomic manifest commit.

Each partition attempt writes under ``<output>/_attempts/<attempt>/`` and commits a manifest
(files, sizes, sha256) carrying its fencing token. The commit table's primary key is the task,
so a partition has at most one visible output (I1); only the task's current attempt, within its
lease, may commit. A late or duplicate worker is refused and its staging is garbage-collected.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import shutil
import stat
import tempfile
from datetime import datetime
from pathlib import Path
from typing import Any

from sqlalchemy import select
from sqlalchemy.exc import IntegrityError
from sqlalchemy.orm import Session

from checkpoint.fencing import current_attempt
from meta.model.durations import utcnow
from meta.model.errors import Conflict, InvalidRequest, NotFound
from meta.model.states import LIVE_ATTEMPT_STATES
from meta.store import audit
from meta.store.models import Attempt, Job, PartitionCommit, Task

STAGING = "_attempts"
JOB_MANIFEST = "_manifest.json"


_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the scan must not hang the commit
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SHOWN = 5  # refused entries named in the error


def build_manifest(staging_dir: str | Path) -> dict[str, Any]:
    """build_manifest lists every regular file under the staging dir with its size and sha256.

    A symlink (to a file or a folder) or any other non-regular entry is refused by name: a
    manifest describes only what the partition wrote inside its own folder, never what a link
    points to. Entries are opened relative to their folder's descriptor with O_NOFOLLOW, so a
    link swapped in after the scan is refused too.
    """
    root = Path(staging_dir)
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        raise InvalidRequest(f"staging directory {root} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InvalidRequest(f"staging directory {root} is a symlink or not a directory: refused") from None
        raise
    files: list[dict[str, Any]] = []
    refused: list[str] = []
    try:
        _scan(root_fd, "", files, refused)
    finally:
        os.close(root_fd)
    if refused:
        raise InvalidRequest(_refusal(root, refused))
    files.sort(key=lambda f: f["path"].split("/"))  # the order Path sorting gave before
    return {"root": str(root), "files": files, "bytes": sum(f["size"] for f in files)}


def _refusal(root: Path, refused: list[str]) -> str:
    """_refusal names the refused entries (the first few) in one line."""
    names = ", ".join(repr(name) for name in sorted(refused)[:_SHOWN])
    more = f" and {len(refused) - _SHOWN} more" if len(refused) > _SHOWN else ""
    return f"output {root} holds symlinks or special files, nothing committed: {names}{more}"


def _scan(dir_fd: int, prefix: str, files: list[dict[str, Any]], refused: list[str]) -> None:
    """_scan records the regular files below ``dir_fd`` and collects every other entry in ``refused``."""
    with os.scandir(dir_fd) as entries:  # scandir works on a duplicate: dir_fd stays open
        listing = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    for name, is_dir in listing:
        if is_dir:
            _scan_subdir(dir_fd, name, f"{prefix}{name}/", files, refused)
        else:
            entry = _file_entry(dir_fd, name, f"{prefix}{name}")
            if entry is None:
                refused.append(f"{prefix}{name}")
            else:
                files.append(entry)


def _scan_subdir(dir_fd: int, name: str, prefix: str, files: list[dict[str, Any]], refused: list[str]) -> None:
    """_scan_subdir descends into one sub-folder, never through a symlink."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        refused.append(prefix.rstrip("/"))  # replaced by a link since the scan
        return
    try:
        _scan(fd, prefix, files, refused)
    finally:
        os.close(fd)


def _file_entry(dir_fd: int, name: str, path: str) -> dict[str, Any] | None:
    """_file_entry is a regular file's path, size and sha256; None for a symlink or a special file."""
    if not stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
        return None  # never open a device or a pipe: opening one can block or have effects
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):  # a link; a socket; a swapped-in dir
            return None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"path": path, "size": info.st_size, "sha256": digest.hexdigest()}


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
