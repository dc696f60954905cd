"""Calls a running job makes about itself: commit a partition's output, report a checkpoint.

Both are fenced (only the task's current attempt, with its current token) and audited with the
caller as actor. The caller must also be allowed to see the job's tenant: an attempt of another
tenant answers "not found", as its job would.
"""

from __future__ import annotations

from typing import Any

from sqlalchemy.orm import Session

from checkpoint import manifest as manifests
from checkpoint import registry
from checkpoint.manifest_files import check_manifest
from meta.model.errors import InvalidRequest, NotFound
from meta.service.artifacts import checkpoint_view
from meta.store.models import Attempt, Job
from tenants.identity import Principal

MAX_CHECKPOINT_PATH_BYTES = 4_096


def commit_output(
    session: Session, principal: Principal, attempt_id: str, token: int, manifest: Any
) -> dict[str, Any]:
    """commit_output makes the attempt's manifest its partition's one visible output (once)."""
    _require_attempt(session, principal, attempt_id)
    row = manifests.commit(session, attempt_id, token, check_manifest(manifest), actor=principal.name)
    return {"task_id": row.task_id, "attempt_id": row.attempt_id, "files": len(row.manifest.get("files") or [])}


def report_checkpoint(
    session: Session,
    principal: Principal,
    attempt_id: str,
    token: int,
    *,
    step: int,
    path: str,
    size_bytes: int | None = None,
    duration_s: float | None = None,
) -> dict[str, Any]:
    """report_checkpoint records a checkpoint of the attempt's task (a stale attempt is refused)."""
    if len(path.encode("utf-8", "surrogatepass")) > MAX_CHECKPOINT_PATH_BYTES or "\x00" in path:
        raise InvalidRequest("a checkpoint path is at most 4096 bytes, without NUL")
    if size_bytes is not None and size_bytes < 0:
        raise InvalidRequest("a checkpoint size must not be negative")
    if duration_s is not None and not 0 <= duration_s < 10**9:
        raise InvalidRequest("a checkpoint duration is a non-negative number of seconds")
    _require_attempt(session, principal, attempt_id)
    view = registry.report(
        session, attempt_id, token, step, path, size_bytes=size_bytes, duration_s=duration_s, actor=principal.name
    )
    return checkpoint_view(view)


def _require_attempt(session: Session, principal: Principal, attempt_id: str) -> None:
    """_require_attempt raises NotFound for an unknown attempt or one of a tenant the caller may not see."""
    attempt = session.get(Attempt, attempt_id)
    job = session.get(Job, attempt.job_id) if attempt is not None else None
    if job is None or not principal.may_view_job(job.tenant):
        raise NotFound(f"attempt {attempt_id} not found")
