"""Operations: every operation of the API for one caller, with JSON-ready answers.

The HTTP service (``meta.service.http``) builds one per request from the authenticated caller,
whose routes come from the operation table (``meta.model.api_operations``). The CLI's local mode
(root on the server host, ``--db``) runs that same app in process, so it authorizes, validates
and answers alike, and the CLI renders the same JSON either way.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from meta.model.arrays import parse_element_ref
from meta.model.durations import parse_instant
from meta.model.errors import InvalidRequest
from meta.model.jobfile import JobFileError, decode_job_text
from meta.model.limits import clip
from meta.model.spec import SpecError, load_spec_text, spec_from_dict
from meta.model.states import JobState
from meta.service import (
    artifacts,
    audit_prune,
    cluster_drains,
    jobside,
    plan_reports,
    secret_admin,
    tenant_admin,
)
from meta.service.api import Service
from meta.service.array_elements import only_elements
from meta.service.decision_history import job_history
from meta.service.explain import explain_job
from meta.service.queue_view import MAX_QUEUE_ROWS, QueueFilter, parse_codes, queue_rows
from meta.service.refusal_audit import RefusalAudit
from meta.store import audit
from meta.store.models import Job
from tenants.identity import Principal
from tenants.secrets import DEFAULT_ROOT

MAX_LIST = 100_000  # jobs or audit lines in one answer
MAX_SOURCE_CHARS = 4_096


class Operations:
    """Operations answers one caller's requests over one Service (and the tenant secrets folder)."""

    def __init__(
        self,
        service: Service,
        principal: Principal,
        *,
        secrets_root: str | Path = DEFAULT_ROOT,
        daemon_uid: int | None = None,
        refusals: RefusalAudit | None = None,
    ):
        self.service = service
        # the service's rate-limited refusal audit (None: each refusal written in full)
        self.refusals = refusals
        self.principal = principal
        self.secrets_root = secrets_root
        # the uid jobs without an owner run as (the daemon's: this process's unless told)
        self.daemon_uid = os.geteuid() if daemon_uid is None else daemon_uid

    # --- who ------------------------------------------------------------------------------

    def whoami(self) -> dict[str, Any]:
        """whoami describes the caller as the service authorizes it."""
        return principal_view(self.principal)

    # --- jobs -----------------------------------------------------------------------------

    def submit_text(
        self, spec_text: str, *, source: str = "<job>", key: str | None = None, submit_dir: str | None = None
    ) -> dict[str, Any]:
        """submit_text validates a job file's text (YAML or JSON) and submits it; the job and whether it is new.

        ``submit_dir`` is the caller's working folder, where the job runs as its user (docs/identity.md §5).
        """
        return self._submit(self._parse_text(spec_text, source), key, submit_dir)

    def submit_texts(
        self, files: list[tuple[str, str]], *, key: str | None = None, submit_dir: str | None = None
    ) -> list[dict[str, Any]]:
        """submit_texts submits several job files (source, text) in one transaction: all or none.

        A refused file is named by its source in every problem, so the caller knows which one.
        """
        specs = []
        for source, text in files:
            try:
                specs.append(self._parse_text(text, source))
            except SpecError as exc:
                raise SpecError([p if p.startswith("(file)") else f"{source}: {p}" for p in exc.problems]) from None
        results = self.service.submit_many(specs, idempotency_key=key, principal=self.principal, submit_dir=submit_dir)
        return [{**r.job.to_dict(), "created": r.created} for r in results]

    def _parse_text(self, spec_text: str, source: str) -> Any:
        """_parse_text reads a job file's text with the same checks as a file read from disk."""
        source = clip(source or "<job>", MAX_SOURCE_CHARS)
        try:
            # strict UTF-8 (no lone surrogates), no NUL
            text = decode_job_text(spec_text.encode("utf-8", "surrogatepass"), source)
        except JobFileError as exc:
            raise SpecError([f"(file) {exc}"]) from None
        return load_spec_text(text, source)

    def submit_spec(self, spec: Any, *, key: str | None = None, submit_dir: str | None = None) -> dict[str, Any]:
        """submit_spec validates an already parsed spec (msbatch's translation) and submits it."""
        return self._submit(spec_from_dict(spec), key, submit_dir)

    def _submit(self, spec: Any, key: str | None, submit_dir: str | None) -> dict[str, Any]:
        result = self.service.submit(spec, idempotency_key=key, principal=self.principal, submit_dir=submit_dir)
        return {**result.job.to_dict(), "created": result.created}

    def list_jobs(
        self, *, tenant: str | None = None, state: str | None = None, limit: int = 200, after: str | None = None
    ) -> list[dict[str, Any]]:
        """list_jobs lists the newest jobs the caller may see, optionally of one tenant and state."""
        jobs = self.service.list_jobs(
            principal=self.principal, tenant=tenant, state=_job_state(state), limit=_limit(limit), after=after
        )
        return [job.to_dict() for job in jobs]

    def queue(
        self,
        *,
        users: Sequence[str] = (),
        accounts: Sequence[str] = (),
        partitions: Sequence[str] = (),
        states: Sequence[str] = (),
        jobs: Sequence[str] = (),
        names: Sequence[str] = (),
        limit: int = MAX_QUEUE_ROWS,
        any_age: bool = False,
    ) -> list[dict[str, Any]]:
        """queue lists waiting and launched jobs the caller may see as msqueue shows them (squeue's fields)."""
        try:
            codes = parse_codes(states)
        except ValueError as exc:
            raise InvalidRequest(str(exc)) from None
        visible = self.principal.visible_tenants()  # None: every tenant (an admin)
        if visible is not None and not visible:
            return []
        wanted = QueueFilter(
            users=frozenset(users), accounts=frozenset(accounts), partitions=frozenset(partitions), states=codes,
            jobs=frozenset(jobs), names=frozenset(names), limit=max(1, min(limit, MAX_QUEUE_ROWS)), any_age=any_age,
        )  # fmt: skip
        with self.service.db.session() as session:
            return [row.to_dict() for row in queue_rows(session, visible, wanted)]

    def status(self, ref: str) -> dict[str, Any]:
        """status is a job's spec, tasks, attempts and recent transitions (only the named elements for ``JOB_3``)."""
        return only_elements(self.service.status(ref, principal=self.principal).to_dict(), parse_element_ref(ref))

    def explain(self, ref: str) -> dict[str, Any]:
        """explain is why each task of the job waits (the last cycle's typed reason)."""
        status = self.service.status(ref, principal=self.principal)
        with self.service.db.session() as session:
            found = explain_job(session, status.summary.id, status.summary.short_id, status.summary.state)
        return only_elements(found, parse_element_ref(ref))

    def explain_history(self, ref: str, limit: int = 20) -> dict[str, Any]:
        """explain_history is what ran before the job while it waited, from the decision log."""
        status = self.service.status(ref, principal=self.principal)  # another tenant's job: not found
        with self.service.db.session() as session:
            return job_history(session, session.get(Job, status.summary.id), limit)

    def outputs(self, ref: str) -> dict[str, Any]:
        """outputs is the job's committed output manifests, one per partition."""
        status = self.service.status(ref, principal=self.principal)
        with self.service.db.session() as session:
            return artifacts.outputs(session, status.summary.id)

    def checkpoints(self, ref: str, *, node_mtbf_s: float = artifacts.DEFAULT_NODE_MTBF_S) -> dict[str, Any]:
        """checkpoints lists the job's checkpoints and the recommended interval (Young/Daly)."""
        if not 0 < node_mtbf_s <= 1e10:
            raise InvalidRequest("node MTBF must be a positive number of seconds (at most 1e10)")
        status = self.service.status(ref, principal=self.principal)
        workers = int(status.spec.get("workers", 1))
        with self.service.db.session() as session:
            return artifacts.checkpoints(session, status.summary.id, workers, node_mtbf_s)

    def cancel(self, ref: str) -> dict[str, Any]:
        """cancel stops the job (idempotent) and returns its status."""
        return self.service.cancel(ref, principal=self.principal).to_dict()

    def hold(self, ref: str) -> dict[str, Any]:
        """hold keeps a waiting job from being scheduled and returns its status."""
        return self.service.hold(ref, principal=self.principal).to_dict()

    def release(self, ref: str) -> dict[str, Any]:
        """release lets a held job be scheduled and returns its status."""
        return self.service.release(ref, principal=self.principal).to_dict()

    def retry(self, ref: str, task: int | None = None) -> list[dict[str, Any]]:
        """retry re-queues the failed or cancelled tasks of a job (or only task ``task``)."""
        if task is not None and task < 0:
            raise InvalidRequest(f"task index {task} must not be negative")
        target = ref if task is None else f"{ref}/{task}"
        tasks = self.service.retry(target, principal=self.principal)
        return [{"id": t.id, "index": t.index, "name": t.name, "state": t.state} for t in tasks]

    # --- tenants, secrets, audit ------------------------------------------------------------

    def tenants(self) -> list[dict[str, Any]]:
        """tenants lists the tenants the caller may see."""
        with self.service.db.session() as session:
            return tenant_admin.visible_tenants(session, self.principal)

    def tenant(self, name: str) -> dict[str, Any]:
        """tenant shows one tenant the caller may see."""
        with self.service.db.session() as session:
            return tenant_admin.show_tenant(session, self.principal, name)

    def set_tenant(
        self,
        name: str,
        *,
        weight: float | None = None,
        guaranteed: list[str] | None = None,
        limits: list[str] | None = None,
        submit: dict[str, float | None] | None = None,
        priority_classes: list[str] | None = None,
        clusters: list[str] | None = None,
    ) -> dict[str, Any]:
        """set_tenant sets a tenant's guarantees, submit limits, classes and clusters (admins; Slurm's settings are refused)."""
        with self.service.db.session() as session:
            return tenant_admin.change_tenant(
                session, self.principal, name, weight=weight, guaranteed=guaranteed, limits=limits, submit=submit,
                priority_classes=priority_classes, clusters=clusters,
            )

    def secret_names(self, tenant: str) -> list[str]:
        """secret_names lists a tenant's secret names."""
        return secret_admin.names(self.secrets_root, self.principal, tenant)

    def set_secret(self, tenant: str, name: str, value: str) -> dict[str, Any]:
        """set_secret sets one secret value (audited by name)."""
        secret_admin.put(self.service.db, self.secrets_root, self.principal, tenant, name, value)
        return {"tenant": tenant, "name": name, "set": True}

    def delete_secret(self, tenant: str, name: str) -> dict[str, Any]:
        """delete_secret deletes one secret (audited by name)."""
        secret_admin.delete(self.service.db, self.secrets_root, self.principal, tenant, name)
        return {"tenant": tenant, "name": name, "deleted": True}

    def allow_secret(
        self, tenant: str, name: str, users: list[str] | None = None, *, everyone: bool = False
    ) -> dict[str, Any]:
        """allow_secret names the users whose jobs may read a secret, or every member again (audited)."""
        if (users is None) == (not everyone):
            raise InvalidRequest("name the users whose jobs may read the secret, or everyone (not both, not neither)")
        stored = secret_admin.allow(self.service.db, self.secrets_root, self.principal, tenant, name, users)
        return {"tenant": tenant, "name": name, "users": stored}

    def audit(self, *, since: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """audit is the newest audit lines the caller may see (a member: its tenant's only)."""
        try:
            since_at = parse_instant(since) if since else None
        except ValueError as exc:
            raise InvalidRequest(f"--since: {exc}") from None
        with self.service.db.session() as session:
            events = audit.read(session, tenants=self.principal.audit_tenants(), since=since_at, limit=_limit(limit))
        return [event.to_dict() for event in events]

    def audit_prune(self, before: str, *, confirm: bool = False) -> dict[str, Any]:
        """audit_prune deletes audit lines older than ``before`` (admins, confirmed; the prune is audited)."""
        return audit_prune.prune(self.service.db, self.principal, before, confirm=confirm)

    # --- saved capacity-planning reports -------------------------------------------------------

    def plan_reports(self, *, kind: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
        """plan_reports lists the saved plan reports, newest first (admins and coordinators; others: Forbidden)."""
        return plan_reports.listing(self.service.db, self.principal, kind=kind or None, limit=limit)

    def plan_report(self, report_id: int, *, plots: bool = False) -> dict[str, Any]:
        """plan_report is one saved report as the caller may see it: a coordinator, its tenants' rows only."""
        return plan_reports.one(self.service.db, self.principal, report_id, plots=plots)

    # --- clusters drained from metasched's point of view ----------------------------------------

    def cluster_drains(self) -> list[dict[str, Any]]:
        """cluster_drains lists the drained clusters with their reasons, who drained them and when (admins)."""
        return cluster_drains.listing(self.service.db, self.principal)

    def drain_cluster(self, cluster: str, reason: str | None = None) -> dict[str, Any]:
        """drain_cluster stops new placements on ``cluster``, running work finishing (admins; idempotent; audited)."""
        return cluster_drains.drain(self.service.db, self.principal, cluster, reason)

    def resume_cluster(self, cluster: str) -> dict[str, Any]:
        """resume_cluster lets ``cluster`` take new work again (admins; idempotent; audited)."""
        return cluster_drains.resume(self.service.db, self.principal, cluster)

    # --- from inside a job --------------------------------------------------------------------

    def commit(self, attempt_id: str, token: int, manifest: Any, *, secret: str | None = None) -> dict[str, Any]:
        """commit records a partition attempt's output manifest (proven by the attempt's secret; fenced; once)."""
        return jobside.audited(
            self.service.db, self.principal, "output.commit", attempt_id,
            lambda session: jobside.commit_output(
                session, self.principal, attempt_id, token, manifest, secret=secret, daemon_uid=self.daemon_uid
            ), self.refusals,
        )  # fmt: skip

    def report_checkpoint(
        self,
        attempt_id: str,
        token: int,
        *,
        step: int,
        path: str,
        size_bytes: int | None = None,
        duration_s: float | None = None,
        secret: str | None = None,
    ) -> dict[str, Any]:
        """report_checkpoint records a checkpoint of a running training attempt (proven by its secret; fenced)."""
        return jobside.audited(
            self.service.db, self.principal, "checkpoint.report", attempt_id,
            lambda session: jobside.report_checkpoint(
                session, self.principal, attempt_id, token,
                step=step, path=path, size_bytes=size_bytes, duration_s=duration_s,
                secret=secret, daemon_uid=self.daemon_uid,
            ), self.refusals,
        )  # fmt: skip

    def attempt_secret(self, attempt_id: str, token: int, name: str, *, secret: str | None = None) -> dict[str, Any]:
        """attempt_secret is one secret value the attempt's job declared (its live attempt, proven; audited by name)."""
        return jobside.audited(
            self.service.db, self.principal, "secret.read", attempt_id,
            lambda session: jobside.secret_value(
                session, self.principal, attempt_id, token, name,
                secret=secret, daemon_uid=self.daemon_uid, secrets_root=self.secrets_root,
            ), self.refusals,
        )  # fmt: skip


def principal_view(principal: Principal) -> dict[str, Any]:
    """principal_view is what ``whoami`` tells: user, uid/gid, tenants (accounts), coordinated ones, admin."""
    return {
        "user": principal.name,
        "uid": principal.uid,
        "gid": principal.gid,
        "tenant": principal.tenant,
        "admin": principal.is_admin,
        "accounts": sorted(principal.accounts or ()),
        "default_account": principal.default_account,
        "coordinates": sorted(principal.coordinates),
    }


def _job_state(state: str | None) -> JobState | None:
    if state is None or state == "":
        return None
    try:
        return JobState(state)
    except ValueError:
        choices = ", ".join(s.value for s in JobState)
        raise InvalidRequest(clip(f"state {state!r} is not one of {choices}")) from None


def _limit(limit: int) -> int:
    if not 1 <= limit <= MAX_LIST:
        raise InvalidRequest(f"limit must be 1 to {MAX_LIST}")
    return limit
