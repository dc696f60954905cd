"""The metasched service API: submit, status, list, cancel and retry.

Each call is one transaction (retried a few times when a compare-and-swap or a unique index
loses a race), authorized by the caller's ``Principal`` (docs/identity.md §4): members submit to
and see their tenants' jobs, a job's owner, its tenant's coordinators and admins cancel and retry
it. Another tenant's job is NotFound, never Forbidden: its existence does not leak.
"""

from __future__ import annotations

import os
import pwd
import time
from collections import Counter
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass, replace
from typing import Any, TypeVar

from sqlalchemy import and_, exists, or_, select, true
from sqlalchemy.exc import IntegrityError, OperationalError
from sqlalchemy.orm import Session

from meta.model.arrays import parse_element_ref
from meta.model.durations import utcnow
from meta.model.errors import (
    ConcurrentModification,
    Forbidden,
    InvalidRequest,
    NotFound,
    Unschedulable,
)
from meta.model.ids import looks_like_uuid, new_uuid
from meta.model.limits import MAX_TASKS_PER_REQUEST, clip, printable, submit_dir_problem
from meta.model.spec import AnySpec, spec_hash
from meta.model.states import JobState, TaskState
from meta.policy.admission import POLICY_VIOLATION
from meta.policy.config import DEFAULT_PRIORITY_CLASSES
from meta.service.array_elements import cancel_elements, element_tasks
from meta.service.feasibility import InventoryFeasibility
from meta.service.job_env_view import without_env
from meta.service.job_holds import hold_job, release_job
from meta.service.priority_check import check_priority
from meta.service.submission import NewJob, store_jobs
from meta.service.submit_gate import Admission, SubmitGate
from meta.service.views import JobStatus, JobSummary, TaskView, TransitionView, task_counts
from meta.store import audit
from meta.store.db import Database, resolve_url
from meta.store.lifecycle import cancel_job, stored_spec
from meta.store.migrate import ensure_schema
from meta.store.models import Attempt, Job, Task, Transition
from meta.store.statistics import refresh_after_insert
from meta.store.transitions import transition_task
from tenants.identity import ADMIN, InvalidAccount, Principal

T = TypeVar("T")
FeasibilityCheck = Callable[[AnySpec], str | None]  # returns a rejection reason, or None
_RETRIES = 8
MAX_BATCH_JOBS = 1_000  # jobs per submit_many: one transaction, bounded
_RETRIABLE = frozenset({TaskState.FAILED, TaskState.CANCELLED})


@dataclass(frozen=True)
class SubmitResult:
    """SubmitResult is the job a submit landed on and whether this call created it."""

    job: JobSummary
    created: bool


class Service:
    """Service is the Python API of metasched over one database."""

    def __init__(
        self, db: Database, feasibility: FeasibilityCheck | None = None, gate: SubmitGate | None = None
    ) -> None:
        self.db = db
        self.feasibility = feasibility
        # the API's per-tenant submit limits (meta/service/submit_gate.py); None: none (local mode, tools)
        self.gate = gate
        # where jobs that run as the daemon's user write their output (``serve --log-dir``, set by the
        # API of ``metasched serve``; None: not known here, local mode), and who that user is
        self.log_dir: str | None = None
        self.daemon_uid = os.geteuid()
        # the class ranks submit-time priority rights compare (``serve`` sets the policy file's)
        self.priority_ranks: Mapping[str, int] = DEFAULT_PRIORITY_CLASSES

    @classmethod
    def open(cls, url: str | None = None, *, migrate: bool = True) -> Service:
        """open connects to --db / METASCHED_DB / the embedded SQLite file and brings the schema up."""
        resolved = resolve_url(url)
        db = Database(resolved)
        if migrate:
            ensure_schema(db.engine, resolved)
        return cls(db, feasibility=InventoryFeasibility(db))

    # --- plumbing ---------------------------------------------------------------------------

    def _unit(self, work: Callable[[Session], T]) -> T:
        """_unit runs ``work`` in one transaction, retrying when it lost a race."""
        for attempt in range(_RETRIES):
            try:
                with self.db.session() as session:
                    return work(session)
            except (ConcurrentModification, IntegrityError, OperationalError) as exc:
                if attempt == _RETRIES - 1 or not _retryable(exc):
                    raise
                time.sleep(0.01 * (2**attempt))
        raise AssertionError("unreachable")

    # --- submit -----------------------------------------------------------------------------

    def submit(
        self,
        spec: AnySpec,
        idempotency_key: str | None = None,
        principal: Principal = ADMIN,
        submit_dir: str | None = None,
    ) -> SubmitResult:
        """submit stores a job once per (tenant, key): same key and spec → same job; other spec → Conflict.

        ``submit_dir`` is the caller's working folder: a job of another user than the daemon's
        runs there (docs/identity.md §5).
        """
        check_submit_dir(submit_dir)
        principal_check(principal, spec.tenant)
        if idempotency_key is not None and not (0 < len(idempotency_key) <= 256):
            raise InvalidRequest("an idempotency key must be 1 to 256 characters")
        check_priority(self.db, principal, [spec], self.priority_ranks)  # a class or deadline is a right
        if self.feasibility is not None:
            problem = self.feasibility(spec)
            if problem:
                raise Unschedulable(problem)
        fingerprint = spec_hash(spec)
        store = lambda: [self._unit(lambda s: _submit(s, spec, fingerprint, idempotency_key, principal, submit_dir))]  # noqa: E731
        return self._gated(principal, [spec], store)[0]

    def submit_many(
        self,
        specs: Sequence[AnySpec],
        idempotency_key: str | None = None,
        principal: Principal = ADMIN,
        submit_dir: str | None = None,
    ) -> list[SubmitResult]:
        """submit_many stores a batch of jobs in one transaction: all of them or, on any refusal, none.

        With a key, job ``i`` of the batch has the key ``KEY/i``: sending the same batch again
        answers the jobs it created the first time.
        """
        if not 0 < len(specs) <= MAX_BATCH_JOBS:
            raise InvalidRequest(f"a batch holds 1 to {MAX_BATCH_JOBS:,} jobs, not {len(specs):,}")
        check_submit_dir(submit_dir)
        if idempotency_key is not None and not (0 < len(idempotency_key) <= 256 - len(str(MAX_BATCH_JOBS)) - 1):
            raise InvalidRequest("a batch's idempotency key must be 1 to 250 characters")
        check_request_tasks(specs)
        wanted = []
        for index, spec in enumerate(specs):
            principal_check(principal, spec.tenant)
            problem = self.feasibility(spec) if self.feasibility is not None else None
            if problem:
                raise Unschedulable(f"job {index} of the batch: {problem}")
            key = f"{idempotency_key}/{index}" if idempotency_key is not None else None
            wanted.append(NewJob(spec, spec_hash(spec), key))
        check_priority(self.db, principal, specs, self.priority_ranks)  # a class or deadline is a right
        return self._gated(principal, specs, lambda: [
            SubmitResult(one.job, one.created)
            for one in self._unit(lambda s: store_jobs(s, wanted, principal, submit_dir, utcnow()))
        ])  # fmt: skip

    def _gated(
        self, principal: Principal, specs: Sequence[AnySpec], store: Callable[[], list[SubmitResult]]
    ) -> list[SubmitResult]:
        """_gated stores through the submit gate, then refreshes the planner's statistics after a large insert."""
        results = self._admitted(principal, specs, store)
        refresh_after_insert(self.db, sum(spec.task_count() for one, spec in zip(results, specs, strict=True) if one.created))
        return results

    def _admitted(
        self, principal: Principal, specs: Sequence[AnySpec], store: Callable[[], list[SubmitResult]]
    ) -> list[SubmitResult]:
        """_admitted stores through the submit gate: admitted (or refused) first, the reservation settled after."""
        if self.gate is None:
            return store()
        # charged in tasks (issue 22, S4): a job of 20,000 partitions costs what 20,000 one-task jobs do
        tasks: Counter[str] = Counter()
        for spec in specs:
            tasks[spec.tenant] += spec.task_count()
        admission = self.gate.admit(principal.name, tasks)
        try:
            results = store()
        except BaseException:
            self.gate.release(admission)
            raise
        created: Counter[str] = Counter()
        for result in results:
            if result.created:
                created[result.job.tenant] += sum(result.job.tasks.values())
        self.gate.settle(admission, created)
        return results

    # --- reads ------------------------------------------------------------------------------

    def status(self, job_ref: str, principal: Principal = ADMIN) -> JobStatus:
        """status returns the spec, tasks, attempts and latest reasons of a job."""
        return self._unit(lambda s: self._status_of(s, _find_job(s, job_ref, principal), principal))

    def _status_of(self, session: Session, job: Job, principal: Principal) -> JobStatus:
        """_status_of is a job's status as ``principal`` may see it, with where the daemon's own jobs log."""
        status = _status(session, job, self.daemon_uid)
        # issue 22, S7: the submitting environment is its owner's (and admins')
        if not principal.may_read_job_env(job.tenant, job.owner_uid):
            status = replace(status, spec=without_env(status.spec))
        return replace(status, log_dir=self.log_dir) if status.runs_as_daemon else status

    def list_jobs(
        self,
        principal: Principal = ADMIN,
        tenant: str | None = None,
        state: JobState | None = None,
        limit: int = 200,
        after: str | None = None,
    ) -> list[JobSummary]:
        """list_jobs lists the newest jobs the caller may see (older than job ``after``), optionally by tenant and state."""
        if tenant is not None and not principal.may_view_tenant(tenant):
            return []
        visible = principal.visible_tenants()  # None: every tenant (an admin)
        scope = frozenset({tenant}) if tenant is not None else visible
        if scope is not None and not scope:
            return []  # a caller without accounts sees no job
        return self._unit(lambda s: _list(s, scope, state, limit, after))

    # --- changes ----------------------------------------------------------------------------

    def cancel(self, job_ref: str, principal: Principal = ADMIN) -> JobStatus:
        """cancel is idempotent: pending tasks end, live attempts are marked to be stopped."""

        def work(session: Session) -> JobStatus:
            job = _find_job(session, job_ref, principal)
            require_act(principal, job, "cancel")
            element = parse_element_ref(job_ref)
            if element.indexes is not None:  # JOB_3, JOB_[1-3]: only those array elements
                cancel_elements(session, job, element, principal.name)
                return self._status_of(session, job, principal)
            if not job.cancel_requested:
                audit.record(session, principal.name, "job.cancel", job.short_id, tenant=job.tenant)
            cancel_job(session, job, principal.name)
            return self._status_of(session, job, principal)

        return self._unit(work)

    def retry(self, ref: str, principal: Principal = ADMIN) -> list[TaskView]:
        """retry sends failed or cancelled tasks of a job (or one task ``JOB/INDEX``) back to pending."""

        def work(session: Session) -> list[TaskView]:
            tasks = _find_tasks(session, ref, principal)
            job = session.get(Job, tasks[0].job_id)
            assert job is not None
            require_act(principal, job, "retry")
            retried = _retry(session, tasks, principal.name)
            audit.record(
                session, principal.name, "job.retry", job.short_id, tenant=job.tenant, tasks=[t.index for t in retried]
            )
            return retried

        admission = self._admit_retry(ref, principal)
        try:
            retried = self._unit(work)
        except BaseException:
            if admission is not None and self.gate is not None:
                self.gate.release(admission)
            raise
        if admission is not None and self.gate is not None:
            self.gate.settle(admission, {tenant: len(retried) for tenant in admission.jobs})
        return retried

    def _admit_retry(self, ref: str, principal: Principal) -> Admission | None:
        """_admit_retry charges a retry's re-queued tasks to the tenant's pending-task limits (issue 22, S4).

        Counted before the write (the count the write makes may differ by a race, never by more than
        the job's tasks): a refusal audits in a session of its own, which must not wait on ours.
        """
        if self.gate is None:
            return None

        def count(session: Session) -> tuple[str, int]:
            tasks = _find_tasks(session, ref, principal)
            job = session.get(Job, tasks[0].job_id)
            assert job is not None
            require_act(principal, job, "retry")
            return job.tenant, sum(TaskState(t.state) in _RETRIABLE for t in tasks)

        tenant, tasks = self._unit(count)
        return self.gate.admit(principal.name, {tenant: tasks}) if tasks else None

    def hold(self, job_ref: str, principal: Principal = ADMIN) -> JobStatus:
        """hold keeps a waiting job from being scheduled (JobHeldUser; JobHeldAdmin when an admin holds it)."""
        return self._holding(job_ref, principal, hold_job, "hold")

    def release(self, job_ref: str, principal: Principal = ADMIN) -> JobStatus:
        """release lets a held job be scheduled again (an admin's hold yields to admins only)."""
        return self._holding(job_ref, principal, release_job, "release")

    def _holding(
        self, job_ref: str, principal: Principal, change: Callable[[Session, Job, Principal], None], what: str
    ) -> JobStatus:
        """_holding applies a hold or a release for a caller allowed to act on the job (as for cancel)."""

        def work(session: Session) -> JobStatus:
            job = _find_job(session, job_ref, principal)
            require_act(principal, job, what)
            change(session, job, principal)
            return self._status_of(session, job, principal)

        return self._unit(work)


def _retryable(exc: Exception) -> bool:
    """_retryable tells a lost race (retry) from a real error (raise)."""
    if isinstance(exc, ConcurrentModification | IntegrityError):
        return True
    message = str(exc).lower()
    return "locked" in message or "deadlock" in message or "could not serialize" in message


def check_request_tasks(specs: Sequence[AnySpec]) -> None:
    """check_request_tasks refuses a request that makes more tasks than one request may (nothing is stored).

    One transaction writes them all, holding the store's writer: past ``MAX_TASKS_PER_REQUEST`` it
    would starve every other tenant's submit (issue 22, S4).
    """
    total = sum(spec.task_count() for spec in specs)
    if total > MAX_TASKS_PER_REQUEST:
        raise InvalidRequest(f"{POLICY_VIOLATION}: this request makes {total:,} tasks (array elements and "
                             f"partitions count one each), at most {MAX_TASKS_PER_REQUEST:,} per request; "
                             "send smaller batches")  # fmt: skip


def check_submit_dir(submit_dir: str | None) -> None:
    """check_submit_dir refuses a submit directory that is not a bounded absolute path without control characters."""
    if submit_dir is None:
        return
    problem = submit_dir_problem(submit_dir)
    if problem:
        raise InvalidRequest(f"submit directory '{printable(clip(submit_dir, 200))}' {problem}")


def principal_check(principal: Principal, tenant: str) -> None:
    """principal_check refuses a submit to a tenant the caller is not a member of (sbatch's wording)."""
    if principal.may_submit(tenant):
        return
    if principal.tenant is not None and principal.tenant != tenant and principal.may_view_tenant(principal.tenant):
        raise InvalidRequest(f"you act for tenant {principal.tenant!r} and cannot submit for {tenant!r}")
    raise InvalidAccount(tenant)


def require_act(principal: Principal, job: Job, what: str) -> None:
    """require_act lets the job's owner, its tenant's coordinators and admins change a job they can see."""
    if not principal.may_act_on_job(job.tenant, job.owner_uid):
        # the caller sees the job (a member of its tenant), so saying "forbidden" leaks nothing
        raise Forbidden(
            f"only the owner of job {job.short_id} ({job.submitted_by or 'unknown'}), a coordinator of "
            f"{job.tenant} or an admin may {what} it"
        )


def _submit(
    session: Session, spec: AnySpec, fingerprint: str, key: str | None, principal: Principal, submit_dir: str | None
) -> SubmitResult:
    (stored,) = store_jobs(session, [NewJob(spec, fingerprint, key)], principal, submit_dir, utcnow())
    return SubmitResult(stored.job, stored.created)


def _find_job(session: Session, ref: str, principal: Principal) -> Job:
    """_find_job resolves a short id or UUID (or an array element id, ``JOB_3``: its job) to a job the caller may see."""
    ref = parse_element_ref(ref).job
    column = Job.id if looks_like_uuid(ref) else Job.short_id
    job = session.scalar(select(Job).where(column == ref))
    if job is None or not principal.may_view_job(job.tenant):
        raise NotFound(f"job {ref} not found")
    return job


def _find_tasks(session: Session, ref: str, principal: Principal) -> list[Task]:
    """_find_tasks resolves ``JOB`` (all its tasks), ``JOB/INDEX``, array elements ``JOB_3`` / ``JOB_[1-3]`` or a task UUID."""
    if "/" in ref:
        job_ref, _, index = ref.partition("/")
        job = _find_job(session, job_ref, principal)
        if not index.isdigit():
            raise InvalidRequest(f"task reference {ref!r}: use JOB/INDEX, e.g. {job.short_id}/0")
        task = session.scalar(select(Task).where(Task.job_id == job.id, Task.index == int(index)))
        if task is None:
            raise NotFound(f"task {ref} not found")
        return [task]
    if looks_like_uuid(ref):
        task = session.get(Task, ref)
        if task is not None:
            job = session.get(Job, task.job_id)
            assert job is not None
            principal.require_access(job.tenant, f"task {ref}")
            return [task]
    job = _find_job(session, ref, principal)
    element = parse_element_ref(ref)
    if element.indexes is not None:  # JOB_3, JOB_[1-3]: those array elements
        return element_tasks(session, job, element)
    return list(session.scalars(select(Task).where(Task.job_id == job.id).order_by(Task.index)))


def _status(session: Session, job: Job, daemon_uid: int) -> JobStatus:
    tasks = list(session.scalars(select(Task).where(Task.job_id == job.id).order_by(Task.index)))
    attempts: dict[str, list[Attempt]] = {}
    for attempt in session.scalars(select(Attempt).where(Attempt.job_id == job.id)):
        attempts.setdefault(attempt.task_id, []).append(attempt)
    recent = session.scalars(
        select(Transition).where(Transition.job_id == job.id).order_by(Transition.id.desc()).limit(20)
    )
    return JobStatus(
        summary=JobSummary.of(job, [TaskState(t.state) for t in tasks]),
        spec=stored_spec(session, job.id),
        cancel_requested=job.cancel_requested,
        tasks=[TaskView.of(t, attempts.get(t.id, [])) for t in tasks],
        recent=[TransitionView.of(t) for t in recent],
        submit_dir=job.submit_dir,
        owner=_user_name(job.owner_uid),
        # the launch's rule (meta/cycle/actuate/launch_plan.run_as_for): the daemon's own jobs log in its folder
        runs_as_daemon=job.owner_uid is None or job.owner_uid == daemon_uid,
    )


def _user_name(uid: int | None) -> str | None:
    """_user_name is the passwd name of a job's owner (its uid as text when the host does not know it)."""
    if uid is None:
        return None
    try:
        return pwd.getpwuid(uid).pw_name
    except KeyError:
        return str(uid)


def _list(
    session: Session, tenants: frozenset[str] | None, state: JobState | None, limit: int, after: str | None
) -> list[JobSummary]:
    # newest first on the (submitted_at, id) index; ``after`` is a keyset cursor (the last job of
    # the previous page), so a page costs the same however deep it is
    query = select(Job).order_by(Job.submitted_at.desc(), Job.id)
    if tenants is not None:
        query = query.where(Job.tenant.in_(sorted(tenants)))
    if after is not None:
        mark = session.execute(
            select(Job.submitted_at, Job.id)
            .where(or_(Job.short_id == after, Job.id == after))
            .where(true() if tenants is None else Job.tenant.in_(sorted(tenants)))
        ).first()
        if mark is None:
            raise NotFound(f"job {after} not found")
        query = query.where(or_(Job.submitted_at < mark[0], and_(Job.submitted_at == mark[0], Job.id > mark[1])))
    query = query.where(*_state_filter(state))
    jobs = list(session.scalars(query.limit(limit if state is None or state in _EXACT else limit * 20)))
    counts = task_counts(session, [job.id for job in jobs])
    summaries = [JobSummary.of_counts(job, counts[job.id]) for job in jobs]
    if state is not None:
        summaries = [s for s in summaries if s.state == state.value]
    return summaries[:limit]


_LIVE_TASKS = (TaskState.SCHEDULED.value, TaskState.RUNNING.value)
_EXACT = {JobState.PENDING, JobState.RUNNING}  # states _state_filter decides in SQL exactly


def _state_filter(state: JobState | None) -> list[Any]:
    """_state_filter narrows the list in SQL to the jobs of ``state`` (exact for pending and running).

    derive_job_state: a job is running when it is not being cancelled and a task is scheduled or
    running; pending when none is live, one is pending and it is not being cancelled. Other states
    are filtered after the fold.
    """

    def having(*states: str) -> Any:
        return exists().where(Task.job_id == Job.id, Task.state.in_(states))

    if state == JobState.PENDING:
        return [Job.cancel_requested.is_(False), ~having(*_LIVE_TASKS), having(TaskState.PENDING.value)]
    if state == JobState.RUNNING:
        return [Job.cancel_requested.is_(False), having(*_LIVE_TASKS)]
    return []


def _retry(session: Session, tasks: list[Task], actor: str) -> list[TaskView]:
    """_retry re-queues failed or cancelled tasks; other tasks are left alone."""
    retriable = [t for t in tasks if TaskState(t.state) in _RETRIABLE]
    if not retriable:
        states = ", ".join(sorted({t.state for t in tasks})) or "none"
        raise InvalidRequest(f"nothing to retry: only failed or cancelled tasks can be retried (tasks are {states})")
    job = session.get(Job, retriable[0].job_id)
    assert job is not None
    if job.cancel_requested:
        job.cancel_requested = False  # a retry is a new intent to run: the old cancel no longer applies
        job.version += 1
    stimulus = f"retry:{new_uuid()}"
    for task in retriable:
        transition_task(
            session,
            task.id,
            TaskState.PENDING,
            stimulus,
            reason="retried by user",
            actor=actor,
            values={"retry_base": task.attempts_made, "not_before": None},
        )
    session.flush()
    return [TaskView.of(session.get(Task, t.id, populate_existing=True), []) for t in retriable]  # type: ignore[arg-type]
