"""Read models the API returns: plain dataclasses that render as tables or JSON."""

from __future__ import annotations

from dataclasses import asdict, dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import func, select
from sqlalchemy.orm import Session

from meta.model.states import JobState, TaskState, derive_job_state
from meta.store.models import Attempt, Job, Task, Transition


def _iso(moment: datetime | None) -> str | None:
    return moment.isoformat() if moment else None


@dataclass(frozen=True)
class AttemptView:
    """AttemptView is one attempt as the user sees it."""

    id: str
    number: int
    state: str
    fencing_token: int
    slurm_job_id: str | None
    nodes: list[str]
    exit_code: int | None
    failure_category: str | None
    reason: str
    lease_expires_at: str | None
    created_at: str | None
    started_at: str | None
    ended_at: str | None

    @classmethod
    def of(cls, row: Attempt) -> AttemptView:
        """of builds the view from a row."""
        return cls(
            id=row.id,
            number=row.number,
            state=row.state,
            fencing_token=row.fencing_token,
            slurm_job_id=row.slurm_job_id,
            nodes=sorted(set(row.nodes())),
            exit_code=row.exit_code,
            failure_category=row.failure_category,
            reason=row.reason,
            lease_expires_at=_iso(row.lease_expires_at),
            created_at=_iso(row.created_at),
            started_at=_iso(row.started_at),
            ended_at=_iso(row.ended_at),
        )


@dataclass(frozen=True)
class TaskView:
    """TaskView is one task with its attempts."""

    id: str
    index: int
    name: str
    state: str
    reason: str
    attempts: list[AttemptView] = field(default_factory=list)

    @classmethod
    def of(cls, row: Task, attempts: list[Attempt]) -> TaskView:
        """of builds the view from a task row and its attempts."""
        return cls(
            id=row.id,
            index=row.index,
            name=row.name,
            state=row.state,
            reason=row.reason,
            attempts=[AttemptView.of(a) for a in sorted(attempts, key=lambda a: a.number)],
        )


@dataclass(frozen=True)
class JobSummary:
    """JobSummary is one line of ``metasched list``."""

    id: str
    short_id: str
    name: str
    tenant: str
    queue: str
    kind: str
    priority_class: str
    state: str
    tasks: dict[str, int]
    submitted_at: str | None
    hold: str | None = None  # "user" (JobHeldUser) or "admin" (JobHeldAdmin) while the job is held

    @classmethod
    def of(cls, job: Job, task_states: list[TaskState]) -> JobSummary:
        """of builds the summary from a job row and its task states."""
        counts: dict[str, int] = {}
        for state in task_states:
            counts[state.value] = counts.get(state.value, 0) + 1
        return cls.of_counts(job, counts)

    @classmethod
    def of_counts(cls, job: Job, counts: dict[str, int]) -> JobSummary:
        """of_counts builds the summary from a job row and how many of its tasks are in each state."""
        counts = {s.value: counts[s.value] for s in TaskState if counts.get(s.value)}  # one stable order
        task_states = [TaskState(state) for state in counts]
        return cls(
            id=job.id,
            short_id=job.short_id,
            name=job.name,
            tenant=job.tenant,
            queue=job.queue,
            kind=job.kind,
            priority_class=job.priority_class,
            state=derive_job_state(task_states, job.cancel_requested).value,
            tasks=counts,
            submitted_at=_iso(job.submitted_at),
            hold=job.hold,
        )

    def to_dict(self) -> dict[str, Any]:
        """to_dict renders the summary for --json."""
        return asdict(self)


@dataclass(frozen=True)
class TransitionView:
    """TransitionView is one line of a job's history."""

    entity: str
    entity_id: str
    from_state: str
    to_state: str
    reason: str
    actor: str
    stimulus_id: str
    at: str | None

    @classmethod
    def of(cls, row: Transition) -> TransitionView:
        """of builds the view from a transition-log row."""
        return cls(
            entity=row.entity,
            entity_id=row.entity_id,
            from_state=row.from_state,
            to_state=row.to_state,
            reason=row.reason,
            actor=row.actor,
            stimulus_id=row.stimulus_id,
            at=_iso(row.at),
        )


@dataclass(frozen=True)
class JobStatus:
    """JobStatus is everything ``metasched status`` shows: spec, tasks, attempts, latest reasons."""

    summary: JobSummary
    spec: dict[str, Any]
    cancel_requested: bool
    tasks: list[TaskView]
    recent: list[TransitionView]
    submit_dir: str | None = None  # where its attempts' relative log paths start (metasched status)
    owner: str | None = None  # the user who submitted it (None: a job older than issue 12)
    # whether its attempts run as the daemon's own user (root's local-mode jobs, jobs without an
    # owner): their output goes to the daemon's log folder, not to sbatch's default
    runs_as_daemon: bool = False
    log_dir: str | None = None  # the daemon's log folder (``serve --log-dir``), when the API knows it

    @property
    def state(self) -> JobState:
        """state is the job's derived state."""
        return JobState(self.summary.state)

    def to_dict(self) -> dict[str, Any]:
        """to_dict renders the full status for --json."""
        return {
            **self.summary.to_dict(),
            "cancel_requested": self.cancel_requested,
            "spec": self.spec,
            "task_list": [asdict(task) for task in self.tasks],
            "recent_transitions": [asdict(t) for t in self.recent],
            "submit_dir": self.submit_dir,
            "owner": self.owner,
            "runs_as_daemon": self.runs_as_daemon,
            "log_dir": self.log_dir if self.runs_as_daemon else None,
        }


def task_counts(session: Session, job_ids: list[str]) -> dict[str, dict[str, int]]:
    """task_counts is how many tasks of each job are in each state (what JobSummary.of_counts takes), one query."""
    counts: dict[str, dict[str, int]] = {job_id: {} for job_id in job_ids}
    if job_ids:
        rows = session.execute(
            select(Task.job_id, Task.state, func.count()).where(Task.job_id.in_(job_ids)).group_by(Task.job_id, Task.state)
        )
        for job_id, state, count in rows:
            counts[job_id][state] = count
    return counts
