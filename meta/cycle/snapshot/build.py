"""Cycle step 7, snapshot: the policy's Snapshot, built from the store and the Slurm inventory.

One read transaction gives a consistent view: pending tasks whose backoff has passed, every live
attempt as a reservation (launching and unknown ones included: their capacity stays reserved),
tenants with quotas and decayed usage. Specs are immutable, so parsed specs are cached by job id.
"""

from __future__ import annotations

import logging
from collections import OrderedDict
from collections.abc import Iterable, Sequence
from datetime import datetime
from typing import Any, Protocol

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from checkpoint.site import resume_cluster
from meta.cycle.snapshot.gates import GateFacts, gate_facts
from meta.cycle.snapshot.live_view import LiveView
from meta.cycle.snapshot.pending_view import PendingView
from meta.model.durations import utcnow
from meta.model.errors import JOB_FAULTS
from meta.model.kinds import JobKind, Topology
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.model.sbatch_fields import placement_filters
from meta.model.spec import AnySpec, InferenceSpec, TrainingSpec, spec_from_json
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, TaskState
from meta.policy.memo_bound import only_keys, outgrown
from meta.policy.snapshot import NodeShare, PendingTask, PriorHold, Reservation, Snapshot, TenantState
from meta.store.chunks import among, chunked
from meta.store.models import Attempt, Checkpoint, CycleRecord, Job, JobSpecRow, Task, Tenant, TenantUsage

log = logging.getLogger("metasched.snapshot")
_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]
_SPARE_SPECS = 1000  # jobs kept beyond twice the active ones before the cache is pruned
_PARSED_KEPT = 8192  # parsed specs kept (about 5 KB each), least recently used dropped first


class SpecCache:
    """SpecCache parses each job's spec once and keeps what each period reads of it: specs never change after submit.

    The parsed specs themselves are kept for the most recently used ``_PARSED_KEPT`` jobs only
    (about 5 KB each: 50,000 waiting jobs kept 265 MB, issue 24); a period reads the derived
    parts below, and the rare full reads (a launch, an ended partition's output) parse again.
    """

    def __init__(self) -> None:
        self._specs: OrderedDict[str, AnySpec] = OrderedDict()  # least recently used first
        # job id -> (the job's facts, job_fields): a new leader describes 100,000 tasks of a few
        # hundred jobs, and the per-job part was two thirds of each description (issue 24)
        self._fields: dict[str, tuple[tuple[Any, ...], dict[str, Any]]] = {}
        self._gates: dict[str, GateFacts | None] = {}  # job id -> what the gates read of its spec

    def get(self, session: Session, job_id: str) -> AnySpec:
        """get returns the parsed spec of a job, reading it only when it is not kept."""
        spec = self._recent(job_id)
        if spec is None:
            row = session.get(JobSpecRow, job_id)
            assert row is not None, f"job {job_id} has no spec"
            spec = self._keep(job_id, spec_from_json(row.spec_json))
        return spec

    def parsed(self, job_id: str, spec_json: str) -> AnySpec:
        """parsed returns the job's spec, parsing ``spec_json`` (its stored text, read already) only when it is not kept."""
        spec = self._recent(job_id)
        return spec if spec is not None else self._keep(job_id, spec_from_json(spec_json))

    def fields(self, job: JobFacts, spec: AnySpec) -> dict[str, Any]:
        """fields is ``job_fields(job, spec)``, worked out again only when the job's facts changed."""
        facts = (job.tenant, job.kind, job.priority_class, job.submitted_at, job.short_id)
        kept = self._fields.get(job.id)
        if kept is not None and kept[0] == facts:
            return kept[1]
        fields = job_fields(job, spec)
        self._fields[job.id] = (facts, fields)
        return fields

    def gate_facts(self, session: Session, job_id: str) -> GateFacts | None:
        """gate_facts is what the gates read of the job's spec (gates.gate_facts), worked out once per job."""
        try:
            return self._gates[job_id]
        except KeyError:
            spec = self.get(session, job_id)  # a parse keeps them (``_keep``)
        if job_id not in self._gates:  # the spec was kept parsed, its gate facts pruned (keep_only)
            self._gates[job_id] = gate_facts(spec)
        return self._gates[job_id]

    def keep_only(self, pending: Sequence[PendingTask], reservations: Sequence[Reservation]) -> None:
        """keep_only drops what it keeps of jobs neither waiting nor running, once it holds twice as many as could be.

        Without it a long-running leader kept every job it ever described (issue 24: memory
        grew with history, not with the queue). A dropped job's parts are worked out again if it
        comes back (a retry's backoff ending, a begin time coming).
        """
        held = max(len(self._fields), len(self._gates))
        if not outgrown(held, len(pending) + len(reservations), _SPARE_SPECS):
            return
        active = {t.job_id for t in pending} | {r.job_id for r in reservations}
        self._fields = only_keys(self._fields, active)
        self._gates = only_keys(self._gates, active)

    def _recent(self, job_id: str) -> AnySpec | None:
        """_recent is the kept parsed spec of a job (now the most recently used), or None."""
        spec = self._specs.get(job_id)
        if spec is not None:
            self._specs.move_to_end(job_id)
        return spec

    def _keep(self, job_id: str, spec: AnySpec) -> AnySpec:
        """_keep keeps a newly parsed spec, dropping the least recently used beyond ``_PARSED_KEPT``.

        What the gates read is taken now: the gates ask for every waiting job each period, and
        a spec dropped by then would be read from the store again, one statement per job.
        """
        if job_id not in self._gates:
            self._gates[job_id] = gate_facts(spec)
        self._specs[job_id] = spec
        if len(self._specs) > _PARSED_KEPT:
            self._specs.popitem(last=False)
        return spec


def _spec_of(session: Session, specs: SpecCache, job: JobFacts) -> AnySpec:
    """_spec_of is the job's spec from the cache: a row of the views' facts carries its text, a Job has it joined."""
    text = getattr(job, "spec_json", None)
    return specs.get(session, job.id) if text is None else specs.parsed(job.id, text)


def _spec_or_none(session: Session, specs: SpecCache, job: JobFacts) -> AnySpec | None:
    """_spec_or_none is the job's spec, or None when the current rules refuse what was stored."""
    try:
        return _spec_of(session, specs, job)
    except JOB_FAULTS as exc:
        log.warning("job %s: stored spec refused (%s): its live attempt is reserved as placed", job.id, exc)
        return None


def epoch_s(moment: datetime | None) -> float | None:
    """epoch_s converts an aware datetime to seconds since the epoch (None stays None)."""
    return moment.timestamp() if moment is not None else None


def totals_per_node(shares: Iterable[NodeShare]) -> dict[str, ResourceVector]:
    """totals_per_node sums shares node by node (a gang may put several workers on one node)."""
    totals: dict[str, ResourceVector] = {}
    for share in shares:
        prev = totals.get(share.node)
        totals[share.node] = share.resources if prev is None else prev + share.resources
    return totals


def placement_shares(placement: Sequence[dict[str, Any]]) -> tuple[NodeShare, ...]:
    """placement_shares turns an attempt's stored placement into NodeShares."""
    return tuple(
        NodeShare(
            node=share["node"],
            resources=ResourceVector.model_construct(
                cpus=float(share.get("cpus", 0)),
                memory_mib=int(share.get("memory_mib", 0)),
                gpus=int(share.get("gpus", 0)),
                gpu_type=share.get("gpu_type"),
                storage_gib=int(share.get("storage_gib", 0)),
                network=share.get("network"),
            ),
        )
        for share in placement
    )


def share_to_json(share: NodeShare) -> dict[str, Any]:
    """share_to_json is how one worker's node share is stored in an attempt's placement."""
    r = share.resources
    return {
        "node": share.node,
        "cpus": r.cpus,
        "memory_mib": r.memory_mib,
        "gpus": r.gpus,
        "gpu_type": r.gpu_type,
        "storage_gib": r.storage_gib,
        "network": r.network,
    }


class JobFacts(Protocol):
    """JobFacts is what describing a waiting task reads of its job (a Job, or a row of pending_view.JOB_FACTS)."""

    id: str
    tenant: str
    kind: str
    priority_class: str
    submitted_at: datetime
    short_id: str


class TaskFacts(Protocol):
    """TaskFacts is what describing a waiting task reads of it (a Task, or a row of pending_view.TASK_FACTS)."""

    id: str
    avoid_nodes: list[str]
    attempts_made: int


def job_fields(job: JobFacts, spec: AnySpec) -> dict[str, Any]:
    """job_fields are the PendingTask fields every task of a job shares (its facts and spec)."""
    training = spec if isinstance(spec, TrainingSpec) else None
    deadline = spec.deadline if isinstance(spec, InferenceSpec) else None
    checkpoint = training.checkpoint if training else None
    data = spec.data
    return dict(
        job_id=job.id,
        tenant=job.tenant,
        kind=JobKind(job.kind),
        priority_class=job.priority_class,
        submit_time=job.submitted_at.timestamp(),
        per_worker=spec.worker_resources(),
        workers=spec.workers_per_task(),
        runtime_estimate_s=spec.time_limit_s,
        deadline=epoch_s(deadline),
        topology=training.topology if training else Topology.NONE,
        partition=spec.partition,
        preemptible=spec.is_preemptible(),
        checkpoint_interval_s=checkpoint.interval_s if checkpoint else None,
        restore_cost_s=checkpoint.restore_cost_s if checkpoint else 0.0,
        job_name=job.short_id,
        **placement_filters(spec.sbatch),
        max_parallel=spec.throttle(),
        data_cluster=data.cluster if data else "",
        data_required=bool(data and data.required),
    )


def pending_task(
    job: JobFacts, task: TaskFacts, spec: AnySpec, checkpoint_cluster: str = "", shared: dict[str, Any] | None = None
) -> PendingTask:
    """pending_task describes one waiting task to the policy (``checkpoint_cluster``: checkpoint.site.resume_cluster).

    ``shared``: the job's ``job_fields``, when the caller keeps them (SpecCache.fields).
    """
    return PendingTask(
        task_id=task.id,
        avoid_nodes=frozenset(task.avoid_nodes or ()),
        checkpoint_cluster=checkpoint_cluster,
        **(job_fields(job, spec) if shared is None else shared),
    )


def _describe(session: Session, specs: SpecCache, job: JobFacts, task: TaskFacts) -> PendingTask:
    """_describe is pending_task with the spec from the cache and the cluster a retry's checkpoint is readable on.

    The leader describes a waiting task again only when its row changes (pending_view.py), so the
    checkpoint query runs once per retry, not once per period.
    """
    spec = _spec_of(session, specs, job)
    return pending_task(job, task, spec, resume_cluster(session, task, spec), specs.fields(job, spec))  # type: ignore[arg-type]


def reservation(job: Job, attempt: Attempt, spec: AnySpec | None, last_checkpoint: datetime | None) -> Reservation:
    """reservation describes one live attempt holding capacity to the policy.

    Without its spec (stored under older rules and refused by the current ones) the attempt
    still holds its placement: it is reserved, never preempted, and has no expected end.
    """
    start = attempt.started_at or attempt.created_at
    training = spec if isinstance(spec, TrainingSpec) else None
    checkpoint = training.checkpoint if training else None
    deadline = spec.deadline if isinstance(spec, InferenceSpec) else None
    stopping = attempt.state == AttemptState.STOPPING.value
    return Reservation(
        attempt_id=attempt.id,
        task_id=attempt.task_id,
        job_id=job.id,
        tenant=job.tenant,
        priority_class=job.priority_class,
        shares=placement_shares(attempt.placement),
        start_time=start.timestamp(),
        expected_end=start.timestamp() + spec.time_limit_s if spec is not None else None,
        last_checkpoint_time=epoch_s(last_checkpoint),
        restore_cost_s=checkpoint.restore_cost_s if checkpoint else 0.0,
        # a stopping attempt is already on its way out: never pick it as a victim twice, and
        # count the capacity it frees as coming (the policy does not evict a second victim for it)
        preemptible=spec is not None and spec.is_preemptible() and not stopping,
        stopping=stopping,
        min_runtime_s=training.min_runtime_s if training else 0.0,
        kind=JobKind(job.kind),
        deadline=epoch_s(deadline),
    )


def _tenants(session: Session) -> tuple[TenantState, ...]:
    usage = dict(session.execute(select(TenantUsage.tenant, TenantUsage.decayed_gpu_seconds)).all())
    return tuple(
        TenantState(
            name=t.name,
            weight=t.weight,
            guaranteed=dict(t.guaranteed or {}),
            limit=dict(t.limits or {}),
            decayed_usage=float(usage.get(t.name, 0.0)),
            clusters=frozenset(t.clusters or ()),  # an admin's confinement (issue 26): the policy narrows -M to it
            cluster_limits=dict(t.cluster_limits or {}),  # each cluster's own association (issue 26)
        )
        for t in session.scalars(select(Tenant).order_by(Tenant.name))
    )


def _last_checkpoints(session: Session, task_ids: list[str]) -> dict[str, datetime]:
    if not task_ids:
        return {}
    rows = session.execute(
        select(Checkpoint.task_id, func.max(Checkpoint.at)).where(among(session, Checkpoint.task_id, task_ids)).group_by(
            Checkpoint.task_id
        )
    )
    return {task_id: at for task_id, at in rows}


def build_snapshot(
    session: Session,
    nodes: Sequence[NodeState],
    specs: SpecCache,
    *,
    switch_parent: dict[str, str] | None = None,
    inventory_version: int = 0,
    now: datetime | None = None,
    quarantine: list[tuple[str, Exception]] | None = None,
    view: PendingView | None = None,
    live: LiveView | None = None,
) -> Snapshot:
    """build_snapshot reads one consistent Snapshot of queue and reservations for the policy.

    A pending task whose spec cannot be loaded or described (a poison job) is left out, and
    ``(task id, error)`` goes to ``quarantine`` for the caller to fail it: one job's bad data
    never stops the snapshot of everyone else's. With a ``view`` (the leader's), waiting tasks
    are described only when new or changed; with ``live`` (the leader's), so are live attempts.
    """
    moment = now or utcnow()
    if live is not None:
        reservations = live.read(
            session, lambda job, attempt, ckpt: reservation(job, attempt, _spec_or_none(session, specs, job), ckpt)
        )
    else:
        reservations = _reservations(session, specs)
    if view is not None:
        candidates = view.read(session, moment, lambda job, task: _describe(session, specs, job, task), quarantine)
    else:
        candidates = _pending_candidates(session, specs, moment, quarantine)
    return Snapshot(
        now=moment.timestamp(),
        nodes=tuple(nodes),
        reservations=reservations,
        tenants=_tenants(session),
        pending=tuple(candidates),  # the policy applies each job's throttle (meta/policy/throttle.py)
        switch_parent=dict(switch_parent or {}),
        inventory_version=inventory_version,
        holds=last_holds(session),
    )


def last_holds(session: Session) -> tuple[PriorHold, ...]:
    """last_holds is the newest cycle's held nodes (stored by step 11): the policy keeps them next cycle.

    Read from the store, not memory, so a restarted or new leader keeps the promises the last one made.
    """
    held = session.scalar(select(CycleRecord.held).order_by(CycleRecord.id.desc()).limit(1)) or []
    out = []
    for h in held:
        try:
            out.append(PriorHold(str(h["task_id"]), tuple(str(n) for n in h["nodes"]), float(h["planned_start"]),
                                 preempting=h.get("preempting") is True))
        except (KeyError, TypeError, ValueError):
            log.warning("ignoring a stored hold the policy cannot read: %r", h)
    return tuple(out)


def _reservations(session: Session, specs: SpecCache) -> tuple[Reservation, ...]:
    """_reservations describes every live attempt (without the leader's view: tools and tests)."""
    jobs: dict[str, Job] = {}

    live = list(session.scalars(select(Attempt).where(Attempt.state.in_(_LIVE))))
    # the jobs of live attempts (their specs come joined) in one query per chunk, not one per attempt
    job_ids = sorted({a.job_id for a in live})
    for chunk in chunked(job_ids):
        jobs.update((job.id, job) for job in session.scalars(select(Job).where(among(session, Job.id, chunk))))

    def job_of(job_id: str) -> Job:
        return jobs[job_id]

    checkpoints = _last_checkpoints(session, [a.task_id for a in live])
    return tuple(
        reservation(job_of(a.job_id), a, _spec_or_none(session, specs, job_of(a.job_id)), checkpoints.get(a.task_id))
        for a in live
    )


def _pending_candidates(
    session: Session, specs: SpecCache, moment: datetime, quarantine: list[tuple[str, Exception]] | None
) -> list[PendingTask]:
    """_pending_candidates describes every waiting task whose backoff has passed, in queue order."""
    rows = session.execute(
        select(Task, Job)
        .join(Job, Job.id == Task.job_id)
        .where(Task.state == TaskState.PENDING.value, Job.cancel_requested.is_(False))
        .order_by(Job.submitted_at, Task.index, Task.id)
    ).all()
    candidates = []
    for task, job in rows:
        if task.not_before is not None and task.not_before > moment:
            continue  # retry backoff has not passed yet
        try:
            candidates.append(_describe(session, specs, job, task))
        except JOB_FAULTS as exc:  # this job's data, not the cycle's: set it aside (step 7 quarantines it)
            if quarantine is not None:
                quarantine.append((task.id, exc))
    return candidates

