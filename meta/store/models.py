"""ORM models: tenants, queues, immutable job specs, jobs, tasks, attempts and the transition log.

Immutable things (a job's spec, the transition log) are guarded twice: ORM events refuse the
update in Python, and database triggers (see the migrations) refuse it from any client.
"""

from __future__ import annotations

from datetime import datetime
from typing import Any

from sqlalchemy import (
    BigInteger,
    Boolean,
    Float,
    ForeignKey,
    Index,
    Integer,
    LargeBinary,
    String,
    Text,
    UniqueConstraint,
    event,
    text,
)
from sqlalchemy.orm import DeclarativeBase, Mapped, mapped_column, relationship

from meta.model.states import LIVE_ATTEMPT_STATES
from meta.store.types import JSONText, UTCDateTime

LIVE_STATES_SQL = ", ".join(f"'{state.value}'" for state in sorted(LIVE_ATTEMPT_STATES))


class Base(DeclarativeBase):
    """Base is the declarative base of every metasched table."""


class Tenant(Base):
    """Tenant is an organisation that owns jobs, with a fair-share weight and GPU quotas."""

    __tablename__ = "tenants"
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    weight: Mapped[float] = mapped_column(Float, default=1.0)
    guaranteed: Mapped[dict[str, int]] = mapped_column(JSONText, default=dict)
    limits: Mapped[dict[str, int]] = mapped_column(JSONText, default=dict)
    slurm_account: Mapped[str | None] = mapped_column(String(128))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    # where each setting comes from: {"weight": "slurm", "limits": "slurm"}; absent = "metasched"
    sources: Mapped[dict[str, str] | None] = mapped_column(JSONText, nullable=True)
    # pending-job and submit-rate limits (meta.policy.admission.SubmitLimits' fields); NULL: none set
    submit_limits: Mapped[dict[str, Any] | None] = mapped_column(JSONText, nullable=True)
    # priority classes above the job kind's that the tenant's members may ask for (an admin's setting); NULL: none
    priority_classes: Mapped[list[str] | None] = mapped_column(JSONText, nullable=True)
    # the Slurm clusters the tenant's work may run on (an admin's setting, issue 26); NULL: any cluster
    clusters: Mapped[list[str] | None] = mapped_column(JSONText, nullable=True)
    # each cluster's own association limits where the site has several clusters (cluster -> key -> GPUs,
    # synced from Slurm, issue 26); NULL: the limits above hold on every cluster
    cluster_limits: Mapped[dict[str, dict[str, int]] | None] = mapped_column(JSONText, nullable=True)


class Queue(Base):
    """Queue is a named lane of work (e.g. ``default``, ``urgent``) that jobs are submitted to."""

    __tablename__ = "queues"
    name: Mapped[str] = mapped_column(String(128), primary_key=True)
    description: Mapped[str] = mapped_column(Text, default="")
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class JobSpecRow(Base):
    """JobSpecRow is a job's spec, written once with the job and never updated."""

    __tablename__ = "job_specs"
    job_id: Mapped[str] = mapped_column(String(36), ForeignKey("jobs.id"), primary_key=True)
    spec_json: Mapped[str] = mapped_column(Text)
    spec_hash: Mapped[str] = mapped_column(String(64))


class Job(Base):
    """Job is a submitted unit of user intent; its mutable part is only the cancel request."""

    __tablename__ = "jobs"
    __table_args__ = (
        # I4: each accepted idempotency key is exactly one job (NULL keys never collide)
        UniqueConstraint("tenant", "idempotency_key", name="uq_jobs_tenant_idempotency_key"),
        Index("ix_jobs_tenant_submitted", "tenant", "submitted_at"),
        Index("ix_jobs_submitted_id", "submitted_at", "id"),  # list's newest page and its keyset cursor
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    short_id: Mapped[str] = mapped_column(String(16), unique=True)
    tenant: Mapped[str] = mapped_column(String(128), ForeignKey("tenants.name"))
    queue: Mapped[str] = mapped_column(String(128), ForeignKey("queues.name"))
    name: Mapped[str] = mapped_column(String(128))
    kind: Mapped[str] = mapped_column(String(16))
    priority_class: Mapped[str] = mapped_column(String(32))
    idempotency_key: Mapped[str | None] = mapped_column(String(256))
    submitted_by: Mapped[str] = mapped_column(String(128), default="")
    # the MUNGE-authenticated submitter; NULL for jobs older than issue 12 (no owner: coordinators act)
    owner_uid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    owner_gid: Mapped[int | None] = mapped_column(Integer, nullable=True)
    # the submitter's working folder (absolute): a job of another user runs there (sbatch --chdir)
    submit_dir: Mapped[str | None] = mapped_column(Text, nullable=True)
    submitted_at: Mapped[datetime] = mapped_column(UTCDateTime)
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # NULL: not held; "user" (JobHeldUser: --hold, metasched hold) or "admin" (JobHeldAdmin)
    hold: Mapped[str | None] = mapped_column(String(16), nullable=True, index=True)
    version: Mapped[int] = mapped_column(Integer, default=1)

    spec_row: Mapped[JobSpecRow] = relationship(lazy="joined", viewonly=True)
    tasks: Mapped[list[Task]] = relationship(back_populates="job", order_by="Task.index", viewonly=True)


class Task(Base):
    """Task is one schedulable unit of a job: a training gang, an inference partition, an eval."""

    __tablename__ = "tasks"
    __table_args__ = (
        UniqueConstraint("job_id", "index", name="uq_tasks_job_index"),
        Index("ix_tasks_state", "state"),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(36), ForeignKey("jobs.id"))
    index: Mapped[int] = mapped_column(Integer)
    name: Mapped[str] = mapped_column(String(256))
    state: Mapped[str] = mapped_column(String(16))
    version: Mapped[int] = mapped_column(Integer, default=1)
    # I3: the last fencing token handed out for this task; every new attempt takes the next one
    fencing_counter: Mapped[int] = mapped_column(Integer, default=0)
    attempts_made: Mapped[int] = mapped_column(Integer, default=0)
    # attempts_made when a user last retried by hand: the retry policy budget counts from here
    retry_base: Mapped[int] = mapped_column(Integer, default=0)
    reason: Mapped[str] = mapped_column(Text, default="")
    not_before: Mapped[datetime | None] = mapped_column(UTCDateTime)  # retry backoff
    avoid_nodes: Mapped[list[str]] = mapped_column(JSONText, default=list)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    job: Mapped[Job] = relationship(back_populates="tasks", viewonly=True)
    attempts: Mapped[list[Attempt]] = relationship(order_by="Attempt.number", viewonly=True)


class Attempt(Base):
    """Attempt is one try of a task on Slurm, fenced by a token and held by a lease."""

    __tablename__ = "attempts"
    __table_args__ = (
        UniqueConstraint("task_id", "number", name="uq_attempts_task_number"),
        UniqueConstraint("task_id", "fencing_token", name="uq_attempts_task_token"),
        # a new attempt never starts while a live one exists for the same task
        Index(
            "uq_attempts_one_live_per_task",
            "task_id",
            unique=True,
            sqlite_where=text(f"state IN ({LIVE_STATES_SQL})"),
            postgresql_where=text(f"state IN ({LIVE_STATES_SQL})"),
        ),
        Index("ix_attempts_state", "state"),
        Index("ix_attempts_slurm_job_id", "slurm_job_id"),
    )
    id: Mapped[str] = mapped_column(String(36), primary_key=True)
    task_id: Mapped[str] = mapped_column(String(36), ForeignKey("tasks.id"))
    job_id: Mapped[str] = mapped_column(String(36), ForeignKey("jobs.id"))
    number: Mapped[int] = mapped_column(Integer)
    state: Mapped[str] = mapped_column(String(16))
    version: Mapped[int] = mapped_column(Integer, default=1)
    fencing_token: Mapped[int] = mapped_column(Integer)
    lease_expires_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    placement: Mapped[list[dict[str, Any]]] = mapped_column(JSONText, default=list)
    slurm_job_id: Mapped[str | None] = mapped_column(String(32))
    exit_code: Mapped[int | None] = mapped_column(Integer)
    failure_category: Mapped[str | None] = mapped_column(String(32))
    reason: Mapped[str] = mapped_column(Text, default="")
    cancel_requested: Mapped[bool] = mapped_column(Boolean, default=False)
    # why a stop was asked ("cancel" | "preempt"), and when Slurm was signalled / cancelled
    stop_reason: Mapped[str | None] = mapped_column(String(16))
    stop_signalled_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # when sbatch was last sent: an unknown outcome is looked up within a bounded window from here
    launch_sent_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # the leader epoch that created the attempt (every plan is fenced by it)
    epoch: Mapped[int] = mapped_column(Integer, default=0)
    # last time Slurm was seen to know the job (squeue or sacct): "lost" counts from here
    last_seen_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    # SHA-256 of the secret written into the batch script at launch: job-side calls must send the secret
    secret_hash: Mapped[str | None] = mapped_column(String(64), nullable=True)
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    started_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    ended_at: Mapped[datetime | None] = mapped_column(UTCDateTime)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)

    def nodes(self) -> list[str]:
        """nodes lists the node names of the attempt's placement, one per worker share."""
        return [share["node"] for share in self.placement]


class AdoptedJob(Base):
    """AdoptedJob links a metasched job to the plain sbatch job it adopted (one row per Slurm job, ever)."""

    __tablename__ = "adopted_jobs"
    __table_args__ = (
        UniqueConstraint("slurm_job_id", "slurm_submitted_at", name="uq_adopted_jobs_slurm_job"),
        Index("ix_adopted_jobs_slurm_job_id", "slurm_job_id"),
    )
    job_id: Mapped[str] = mapped_column(String(36), ForeignKey("jobs.id"), primary_key=True)
    slurm_job_id: Mapped[str] = mapped_column(String(32))
    # Slurm reuses job ids after its state is wiped: the id and its submit time name one job
    slurm_submitted_at: Mapped[datetime] = mapped_column(UTCDateTime)
    partition: Mapped[str] = mapped_column(String(128))
    adopted_at: Mapped[datetime] = mapped_column(UTCDateTime)


class Transition(Base):
    """Transition is one append-only line of history: who moved what, from where to where, why."""

    __tablename__ = "transitions"
    __table_args__ = (
        # the same stimulus applied twice to the same entity is recorded once
        UniqueConstraint("entity", "entity_id", "stimulus_id", name="uq_transitions_stimulus"),
        Index("ix_transitions_entity", "entity", "entity_id"),
    )
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    entity: Mapped[str] = mapped_column(String(16))  # "task" | "attempt" | "job"
    entity_id: Mapped[str] = mapped_column(String(36))
    job_id: Mapped[str] = mapped_column(String(36))
    stimulus_id: Mapped[str] = mapped_column(String(200))
    from_state: Mapped[str] = mapped_column(String(16))
    to_state: Mapped[str] = mapped_column(String(16))
    reason: Mapped[str] = mapped_column(Text, default="")
    actor: Mapped[str] = mapped_column(String(128), default="")
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class LeaderLease(Base):
    """LeaderLease is the one row a scheduler replica holds to lead; the epoch fences its writes."""

    __tablename__ = "leader_lease"
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    holder: Mapped[str] = mapped_column(String(256))
    epoch: Mapped[int] = mapped_column(Integer)
    expires_at: Mapped[datetime] = mapped_column(UTCDateTime)
    renewed_at: Mapped[datetime] = mapped_column(UTCDateTime)


class SiteIdentity(Base):
    """SiteIdentity is the store's one row naming its metasched site: the id every Slurm job tag carries.

    Drawn at random the first time ``metasched serve`` (or ``db upgrade``) opens the store
    (``meta/store/site.py``); it is not a secret and proves nothing, it only keeps two sites that
    share a cluster apart. Changing it disowns every job launched under the old id.
    """

    __tablename__ = "site_identity"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)  # always 1: one site per store
    site_id: Mapped[str] = mapped_column(String(32))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)


class TaskReason(Base):
    """TaskReason is the latest cycle's typed reason a pending task was not placed (for explain)."""

    __tablename__ = "task_reasons"
    task_id: Mapped[str] = mapped_column(String(36), ForeignKey("tasks.id"), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(36), index=True)
    cycle: Mapped[int] = mapped_column(Integer)
    code: Mapped[str] = mapped_column(String(64))
    message: Mapped[str] = mapped_column(Text)
    remedy: Mapped[str] = mapped_column(Text, default="")
    blocking_job: Mapped[str | None] = mapped_column(String(36))
    blocking_tenant: Mapped[str | None] = mapped_column(String(128))
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class TenantUsage(Base):
    """TenantUsage is a tenant's cost-weighted GPU-seconds, decayed with the configured half-life."""

    __tablename__ = "tenant_usage"
    tenant: Mapped[str] = mapped_column(String(128), ForeignKey("tenants.name"), primary_key=True)
    decayed_gpu_seconds: Mapped[float] = mapped_column(Float, default=0.0)
    updated_at: Mapped[datetime] = mapped_column(UTCDateTime)


class CycleRecord(Base):
    """CycleRecord is one scheduling cycle's summary: when, by which epoch, and what it decided."""

    __tablename__ = "cycles"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    epoch: Mapped[int] = mapped_column(Integer)
    inventory_version: Mapped[int] = mapped_column(BigInteger)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    pending: Mapped[int] = mapped_column(Integer)
    placed: Mapped[int] = mapped_column(Integer)
    preempted: Mapped[int] = mapped_column(Integer)
    duration_s: Mapped[float] = mapped_column(Float)
    fragmentation: Mapped[dict[str, Any]] = mapped_column(JSONText, default=dict)
    held: Mapped[list[dict[str, Any]]] = mapped_column(JSONText, default=list)


class Checkpoint(Base):
    """Checkpoint is one checkpoint a training task reported, fenced by its attempt's token."""

    __tablename__ = "checkpoints"
    __table_args__ = (Index("ix_checkpoints_task_step", "task_id", "step"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    task_id: Mapped[str] = mapped_column(String(36), ForeignKey("tasks.id"))
    attempt_id: Mapped[str] = mapped_column(String(36), ForeignKey("attempts.id"))
    fencing_token: Mapped[int] = mapped_column(Integer)
    step: Mapped[int] = mapped_column(Integer)
    path: Mapped[str] = mapped_column(Text)
    size_bytes: Mapped[int | None] = mapped_column(Integer)
    duration_s: Mapped[float | None] = mapped_column(Float)  # how long writing it took
    at: Mapped[datetime] = mapped_column(UTCDateTime)


class PartitionCommit(Base):
    """PartitionCommit is the one visible output of an inference partition (I1: primary key = task)."""

    __tablename__ = "partition_commits"
    task_id: Mapped[str] = mapped_column(String(36), ForeignKey("tasks.id"), primary_key=True)
    job_id: Mapped[str] = mapped_column(String(36), index=True)
    attempt_id: Mapped[str] = mapped_column(String(36), ForeignKey("attempts.id"))
    fencing_token: Mapped[int] = mapped_column(Integer)
    manifest: Mapped[dict[str, Any]] = mapped_column(JSONText)
    committed_at: Mapped[datetime] = mapped_column(UTCDateTime)


class InventoryRecord(Base):
    """InventoryRecord is the latest node inventory the daemon learned from Slurm (one row).

    The submit API reads it to reject specs that no node could ever host.
    """

    __tablename__ = "inventory"
    id: Mapped[int] = mapped_column(Integer, primary_key=True)
    version: Mapped[str] = mapped_column(String(32))
    nodes: Mapped[list[dict[str, Any]]] = mapped_column(JSONText, default=list)
    switch_parent: Mapped[dict[str, str]] = mapped_column(JSONText, default=dict)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    qos_names: Mapped[list[str] | None] = mapped_column(JSONText, nullable=True)  # None: not read yet


class AuditEvent(Base):
    """AuditEvent is one policy decision or human override, kept append-only (never secrets)."""

    __tablename__ = "audit_events"
    __table_args__ = (Index("ix_audit_events_at", "at"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    actor: Mapped[str] = mapped_column(String(256))
    action: Mapped[str] = mapped_column(String(64))  # e.g. preempt, tenant.set, job.cancel, job.retry
    tenant: Mapped[str | None] = mapped_column(String(128))
    subject: Mapped[str] = mapped_column(String(256))  # the job, task, attempt or tenant acted on
    detail: Mapped[dict[str, Any]] = mapped_column(JSONText, default=dict)


class AuditPrunePermit(Base):
    """AuditPrunePermit exists only inside an admin's prune transaction: the audit triggers let it delete (0015)."""

    __tablename__ = "audit_prune_permits"
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    actor: Mapped[str] = mapped_column(String(256))


class DecisionRow(Base):
    """DecisionRow is one decision on record (place, preempt, hold) or a cycle's context; append-only, bounded."""

    __tablename__ = "decisions"
    __table_args__ = (
        Index("ix_decisions_kind_at", "kind", "at"),
        Index("ix_decisions_at", "at"),
        Index("ix_decisions_job", "job_id"),
        Index("ix_decisions_other_job", "other_job"),
    )
    id: Mapped[int] = mapped_column(BigInteger().with_variant(Integer, "sqlite"), primary_key=True, autoincrement=True)
    cycle: Mapped[int] = mapped_column(Integer)
    at: Mapped[datetime] = mapped_column(UTCDateTime)
    epoch: Mapped[int] = mapped_column(Integer)
    kind: Mapped[str] = mapped_column(String(16))  # place, preempt, hold, cycle
    task_id: Mapped[str | None] = mapped_column(String(36))  # placed / beneficiary / held task
    job_id: Mapped[str | None] = mapped_column(String(36))
    tenant: Mapped[str | None] = mapped_column(String(128))
    other_job: Mapped[str | None] = mapped_column(String(36))  # preempt: the victim's job
    record: Mapped[dict[str, Any]] = mapped_column(JSONText)  # key, reason, alternatives, detail (or context)



class PlanReport(Base):
    """PlanReport is one saved capacity-planning report (``plan calibrate|what-if|need --save``), as ``--json`` prints it.

    Bounded by ``meta/store/plan_reports.py``: a name of at most 64 characters, a report of at most
    2 MiB, and the newest 50 of each kind kept.
    """

    __tablename__ = "plan_reports"
    __table_args__ = (Index("ix_plan_reports_kind_id", "kind", "id"),)
    id: Mapped[int] = mapped_column(Integer, primary_key=True, autoincrement=True)
    kind: Mapped[str] = mapped_column(String(16))  # calibrate, what-if, need
    name: Mapped[str] = mapped_column(String(64))
    created_at: Mapped[datetime] = mapped_column(UTCDateTime)
    created_by: Mapped[str] = mapped_column(String(256))
    report: Mapped[dict[str, Any]] = mapped_column(JSONText)
    report_bytes: Mapped[int] = mapped_column(Integer)


class PlanReportPlot(Base):
    """PlanReportPlot is one PNG of a saved report; ``audience`` says who may see it (cluster: coordinators too; admin)."""

    __tablename__ = "plan_report_plots"
    report_id: Mapped[int] = mapped_column(Integer, ForeignKey("plan_reports.id", ondelete="CASCADE"), primary_key=True)
    name: Mapped[str] = mapped_column(String(64), primary_key=True)
    audience: Mapped[str] = mapped_column(String(16))
    png: Mapped[bytes] = mapped_column(LargeBinary)


class ClusterDrain(Base):
    """ClusterDrain is a Slurm cluster an admin drained from metasched's point of view: no new placements there.

    Written by ``meta/store/cluster_drains.py`` (``metasched cluster drain|resume``); the daemon's
    step 7 drains the cluster's nodes for the policy only, so work running there finishes.
    """

    __tablename__ = "cluster_drains"
    cluster: Mapped[str] = mapped_column(String(20), primary_key=True)  # meta.model.clusters' names: 1-20 characters
    reason: Mapped[str] = mapped_column(Text)  # the admin's words, at most 200 printable characters ("" when none)
    drained_by: Mapped[str] = mapped_column(String(256))
    drained_at: Mapped[datetime] = mapped_column(UTCDateTime)


class ImmutableRowError(Exception):
    """ImmutableRowError is raised when code tries to change a row that is write-once."""


@event.listens_for(JobSpecRow, "before_update")
@event.listens_for(Transition, "before_update")
@event.listens_for(PartitionCommit, "before_update")
@event.listens_for(AuditEvent, "before_update")
@event.listens_for(DecisionRow, "before_update")
def _refuse_update(mapper: Any, connection: Any, target: Any) -> None:
    raise ImmutableRowError(f"{type(target).__name__} rows are write-once")


@event.listens_for(JobSpecRow, "before_delete")
@event.listens_for(Transition, "before_delete")
@event.listens_for(PartitionCommit, "before_delete")
@event.listens_for(AuditEvent, "before_delete")
def _refuse_delete(mapper: Any, connection: Any, target: Any) -> None:
    raise ImmutableRowError(f"{type(target).__name__} rows are never deleted")
