"""Calls a running job makes about itself: commit a partition's output, report a checkpoint, read a secret.

Each proves the attempt (docs/identity.md §5): the caller's MUNGE uid is the uid the job runs
as (its owner; for jobs without one, the daemon's), the body carries the attempt's secret
(checked against its stored digest in constant time) and the fencing token is current. Another
tenant's attempt answers "not found", as its job would; a visible attempt refused for its proof
is 403, a stale token 409. Every call, allowed or refused, is audited with the caller as actor
— names and ids only, never a secret value; refusals through ``RefusalAudit`` (a few in full per
caller, action and error a minute, the rest as one counted summary row).
"""

from __future__ import annotations

from collections.abc import Callable
from typing import Any, TypeVar

from sqlalchemy.orm import Session

from checkpoint import attempt_secret, registry
from checkpoint import manifest as manifests
from checkpoint.fencing import current_attempt
from checkpoint.manifest_files import check_manifest
from meta.model.durations import utcnow
from meta.model.errors import Forbidden, InvalidRequest, MetaschedError, NotFound
from meta.model.limits import clip
from meta.service.artifacts import checkpoint_view
from meta.service.refusal_audit import Refusal, RefusalAudit, mark_audited
from meta.store import audit
from meta.store.db import Database
from meta.store.lifecycle import stored_spec
from meta.store.models import Attempt, Job
from tenants.identity import Principal
from tenants.names import check_secret_name
from tenants.secrets import read_secret, secret_users

MAX_CHECKPOINT_PATH_BYTES = 4_096
T = TypeVar("T")


def commit_output(
    session: Session, principal: Principal, attempt_id: str, token: int, manifest: Any, *, secret: str | None,
    daemon_uid: int,
) -> dict[str, Any]:
    """commit_output makes the attempt's manifest its partition's one visible output (once)."""
    prove_attempt(session, principal, attempt_id, secret, daemon_uid)
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
    secret: str | None,
    daemon_uid: int,
) -> dict[str, Any]:
    """report_checkpoint records a checkpoint of the attempt's task (a stale attempt is refused)."""
    if len(path.encode("utf-8", "surrogatepass")) > MAX_CHECKPOINT_PATH_BYTES or "\x00" in path:
        raise InvalidRequest("a checkpoint path is at most 4096 bytes, without NUL")
    if size_bytes is not None and size_bytes < 0:
        raise InvalidRequest("a checkpoint size must not be negative")
    if duration_s is not None and not 0 <= duration_s < 10**9:
        raise InvalidRequest("a checkpoint duration is a non-negative number of seconds")
    prove_attempt(session, principal, attempt_id, secret, daemon_uid)
    view = registry.report(
        session, attempt_id, token, step, path, size_bytes=size_bytes, duration_s=duration_s, actor=principal.name
    )
    return checkpoint_view(view)


def secret_value(
    session: Session, principal: Principal, attempt_id: str, token: int, name: str, *, secret: str | None,
    daemon_uid: int, secrets_root: Any,
) -> dict[str, Any]:
    """secret_value is one secret the attempt's job declared, for its live attempt only (audited by name)."""
    check_secret_name(name)
    attempt, job = prove_attempt(session, principal, attempt_id, secret, daemon_uid)
    current_attempt(session, attempt_id, token, utcnow(), need_lease=False)  # live, with this token
    if name not in (stored_spec(session, job.id).get("secrets") or []):
        raise Forbidden(f"job {job.short_id} did not declare secret {name}")
    users = secret_users(secrets_root, job.tenant, name)  # issue 22, S15: None is every member's job
    if users is not None and principal.name not in users:
        raise Forbidden(f"secret {name} of {job.tenant} is for the jobs of {', '.join(users) or 'no one'} only, "
                        f"not {principal.name}'s (a coordinator names them: metasched secret allow)")  # fmt: skip
    value = read_secret(secrets_root, job.tenant, name)
    if value is None:
        raise NotFound(f"secret {name} of {job.tenant} is not set")
    audit.record(session, principal.name, "secret.read", job.short_id, tenant=job.tenant, attempt=attempt.id, name=name)
    return {"name": name, "value": value}


def prove_attempt(
    session: Session, principal: Principal, attempt_id: str, secret: str | None, daemon_uid: int
) -> tuple[Attempt, Job]:
    """prove_attempt is the attempt and its job when the caller is the uid the job runs as and holds its secret."""
    attempt = session.get(Attempt, attempt_id)
    job = session.get(Job, attempt.job_id) if attempt is not None else None
    if attempt is None or job is None or not principal.may_view_job(job.tenant):
        raise NotFound(f"attempt {attempt_id} not found")
    runs_as = job.owner_uid if job.owner_uid is not None else daemon_uid
    if principal.uid != runs_as:
        raise Forbidden(f"attempt {attempt_id} runs as uid {runs_as}: only that user may call for it, from its job")
    if not attempt_secret.matches(secret, attempt.secret_hash):
        what = "no" if not secret else "a wrong"
        raise Forbidden(f"attempt {attempt_id}: {what} attempt secret (the job's METASCHED_ATTEMPT_SECRET)")
    return attempt, job


def audited(
    db: Database,
    principal: Principal,
    action: str,
    attempt_id: str,
    work: Callable[[Session], T],
    refusals: RefusalAudit | None = None,
) -> T:
    """audited runs one job-side call in a transaction; a refusal is recorded (rate-limited) in one of its own."""
    try:
        with db.session() as session:
            return work(session)
    except MetaschedError as exc:
        _record_refusal(db, principal, action, attempt_id, exc, refusals or RefusalAudit(db, autoflush=False))
        mark_audited(exc)
        raise


def _record_refusal(
    db: Database, principal: Principal, action: str, attempt_id: str, exc: Exception, refusals: RefusalAudit
) -> None:
    """_record_refusal audits a refused job-side call: who, which attempt, why (the error's one line)."""
    with db.session() as session:
        attempt = session.get(Attempt, attempt_id) if len(attempt_id) <= 64 else None
        job = session.get(Job, attempt.job_id) if attempt is not None else None
        subject, tenant = (job.short_id, job.tenant) if job else (clip(attempt_id, 64), None)
    refusals.refused(Refusal(
        principal.name, f"{action}.refused", subject, type(exc).__name__, tenant=tenant,
        detail={"attempt": clip(attempt_id, 64), "uid": principal.uid, "error": type(exc).__name__,
                "reason": clip(str(exc), 300)},
    ))  # fmt: skip
