"""Cycle step 5, adopt: plain sbatch jobs held in managed partitions become metasched jobs.

A site lists its metasched-managed partitions (``serve --managed-partitions``) and installs
``deploy/slurm/job_submit.lua``, which holds users' jobs there (``slurm_bridge.adoption``).
Each period, after reconcile, the leader:
1. reads squeue; a held job in a managed partition that no metasched job has adopted yet is
   read in ``squeue --json`` (fields no free text can forge) and, if job_submit.lua marked it
   and squeue's columns and ``scontrol -o show job`` say the same (``adoption_check``; else it
   is refused, audited ``job.adopt.refused``), stored as a metasched job
   of its user (uid, gid, working folder), tenant = its account, with the spec
   ``spec.py`` gives it and a row in ``adopted_jobs`` — unique on the Slurm job id and
   submit time, so restarts and new leaders never adopt it twice;
2. follows adopted jobs not released yet: a Slurm job cancelled (``scancel``) or gone ends its
   metasched job as cancelled; a metasched job cancelled (``metasched cancel``, ``mscancel``)
   scancels its held Slurm job; the held job's comment carries metasched's waiting reason;
   an attempt whose release did not take is released again.
Step 13 (actuate, ``release_created``) releases each new attempt of an adopted job onto the nodes the
policy chose instead of running sbatch: commit ``launching`` with the job's Slurm id, then
``scontrol update NodeList=... Comment=<tag>`` and ``scontrol release``. From there the
reconciler follows the job by its tag like any launched attempt.
The tag names this site: a held job whose comment is another metasched site's tag (that site
is releasing it) is never adopted. ``job_submit.lua``'s mark names no site, so a managed
partition belongs to one site: two sites managing the same partition would both adopt its jobs.
"""

from __future__ import annotations

import logging
from dataclasses import dataclass, field
from datetime import datetime

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.cycle.adopt.spec import adopted_spec
from meta.cycle.lease import Leadership, fence
from meta.model.durations import utcnow
from meta.model.spec import SpecError, TrainingSpec
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, TaskState
from meta.store import audit
from meta.store.adopted import SlurmOwner, store_adopted_job
from meta.store.chunks import among
from meta.store.db import Database
from meta.store.lifecycle import cancel_job, mark_launching
from meta.store.models import AdoptedJob, Attempt, Job, Task, TaskReason
from meta.store.site import ensure_site_id
from slurm_bridge import tags
from slurm_bridge.adoption import HeldJob, held_in, held_job
from slurm_bridge.adoption_check import disagreements
from slurm_bridge.client import SlurmClient
from slurm_bridge.errors import SlurmError
from slurm_bridge.parse.scontrol import ScontrolJob
from slurm_bridge.parse.squeue import SqueueJob

log = logging.getLogger("metasched.adopt")
ACTOR = "adopter"
_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]
MAX_COMMENT = 250


@dataclass
class AdoptResult:
    """AdoptResult says what one adoption pass did (for logs and tests)."""

    adopted: list[str] = field(default_factory=list)  # Slurm job ids
    refused: list[str] = field(default_factory=list)  # held jobs whose request has no metasched spec
    cancelled: list[str] = field(default_factory=list)  # metasched jobs ended by a Slurm cancel
    scancelled: list[str] = field(default_factory=list)  # held Slurm jobs of cancelled metasched jobs
    released: list[str] = field(default_factory=list)  # Slurm ids released (again) onto their nodes


def waiting_comment(short_id: str, code: str | None, message: str = "") -> str:
    """waiting_comment is what a held adopted job's comment says (``scontrol show job``, ``squeue -O Comment``)."""
    reason = f"{code}: {message}" if code and message else (code or "waiting for its first scheduling cycle")
    text = f"metasched job {short_id} waits: {reason} (metasched explain {short_id})"
    return " ".join(text.split())[:MAX_COMMENT]  # one line: scontrol prints it in a key=value line


class Adopter:
    """Adopter adopts held plain sbatch jobs, keeps them in step with Slurm, and releases them when placed."""

    def __init__(self, db: Database, client: SlurmClient, partitions: tuple[str, ...], site: str | None = None):
        self.db = db
        self.client = client
        self.partitions = tuple(partitions)
        # the tag a released job gets names this site; a held job tagged by another is that site's
        self.site = site or ensure_site_id(db)
        self._refused: set[str] = set()  # held jobs without a spec: logged once per replica
        self._not_ours: set[str] = set()  # held without job_submit.lua's mark: not read again
        self._comments: dict[str, str] = {}  # Slurm id -> the comment this replica last set

    # --- step 5 -------------------------------------------------------------------------------

    def run(self, leadership: Leadership) -> AdoptResult:
        """run adopts new held jobs and follows adopted ones not released yet (nothing without managed partitions)."""
        result = AdoptResult()
        if not self.partitions:
            return result
        jobs = {str(job.job_id): job for job in self.client.squeue()}
        held = {job_id: job for job_id, job in jobs.items()
                if held_in(job, self.partitions) and not self._other_sites(job)}  # fmt: skip
        with self.db.session() as session:
            known = self._known(session, list(held))
        fresh = [job_id for job_id, job in held.items() if (job_id, job.submit_time) not in known]
        fresh = [job_id for job_id in fresh if job_id not in self._refused and job_id not in self._not_ours]
        if fresh:
            self._adopt(leadership, {job_id: held[job_id] for job_id in fresh}, result)
        self._follow(leadership, jobs, result)
        return result

    def _other_sites(self, job: SqueueJob) -> bool:
        """_other_sites: the held job's comment is another metasched site's tag (that site is releasing it)."""
        tag = tags.parse_tag(job.name, job.comment)
        return tag is not None and tag.other_site(self.site)

    @staticmethod
    def _known(session: Session, slurm_ids: list[str]) -> set[tuple[str, datetime | None]]:
        rows = session.execute(
            select(AdoptedJob.slurm_job_id, AdoptedJob.slurm_submitted_at).where(among(session, AdoptedJob.slurm_job_id, slurm_ids))
        ).all()
        return {(row.slurm_job_id, row.slurm_submitted_at) for row in rows}

    def _adopt(self, leadership: Leadership, fresh: dict[str, SqueueJob], result: AdoptResult) -> None:
        """_adopt reads the new held jobs' requests and stores each marked one whose sources agree as a metasched job."""
        entries = {str(entry.get("job_id")): entry for entry in self.client.squeue_json()}
        records: dict[str, list[ScontrolJob]] = {}
        for record in self.client.show_jobs():  # a job name with a newline may forge a second record
            records.setdefault(str(record.job_id), []).append(record)
        for slurm_id, row in fresh.items():
            if slurm_id not in entries:
                continue  # gone since squeue: nothing to adopt
            try:
                job = held_job(entries[slurm_id])
            except (SlurmError, ValueError) as exc:
                self._refuse(leadership, slurm_id, None, f"its record cannot be read: {exc}", result)
                continue
            if not job.marked:
                self._not_ours.add(slurm_id)  # held by root or an operator, not by job_submit.lua
                continue
            self._adopt_one(leadership, job, row, records.get(slurm_id, []), result)

    def _adopt_one(
        self, leadership: Leadership, job: HeldJob, row: SqueueJob, records: list[ScontrolJob], result: AdoptResult
    ) -> None:  # fmt: skip
        """_adopt_one stores one marked held job, or refuses it when its sources disagree or it has no spec."""
        slurm_id = str(job.job_id)
        differ = disagreements(job, row, records)
        if differ:
            self._refuse(leadership, slurm_id, job, "its Slurm fields disagree: " + "; ".join(differ), result)
            return
        try:
            spec = adopted_spec(job)
        except SpecError as exc:
            self._refuse(leadership, slurm_id, job, str(exc), result)
            return
        with self.db.session() as session:
            fence(session, leadership)
            if (slurm_id, job.submitted_at) in self._known(session, [slurm_id]):
                return
            short_id = store_adopted(session, job, spec)
        result.adopted.append(slurm_id)
        log.info("adopted Slurm job %s of %s (%s) as metasched job %s", slurm_id, job.user, job.account, short_id)  # fmt: skip
        self._comment(slurm_id, waiting_comment(short_id, None))

    def _refuse(
        self, leadership: Leadership, slurm_id: str, job: HeldJob | None, why: str, result: AdoptResult
    ) -> None:
        """_refuse leaves a held job alone, audits it and says why in its comment (once per replica)."""
        self._refused.add(slurm_id)
        result.refused.append(slurm_id)
        log.warning("held Slurm job %s cannot be adopted: %s", slurm_id, why)
        with self.db.session() as session:
            fence(session, leadership)
            # the tenant and user are squeue --json's, the fields free text cannot forge
            who = {"user": job.user, "uid": job.uid} if job is not None else {}
            audit.record(session, ACTOR, "job.adopt.refused", slurm_id, tenant=job.account if job else None,
                         slurm_job_id=slurm_id, reason=why[:MAX_COMMENT], **who)  # fmt: skip
        self._comment(slurm_id, f"metasched cannot adopt this job: {why}"[:MAX_COMMENT])

    def _comment(self, slurm_id: str, text: str) -> None:
        """_comment sets a held job's comment unless this replica already set that text."""
        if self._comments.get(slurm_id) == text:
            return
        try:
            self.client.set_comment(slurm_id, text)
            self._comments[slurm_id] = text
        except SlurmError as exc:
            log.warning("cannot set the comment of Slurm job %s: %s", slurm_id, exc)

    # --- following adopted jobs ----------------------------------------------------------------

    def _follow(self, leadership: Leadership, jobs: dict[str, SqueueJob], result: AdoptResult) -> None:
        """_follow keeps unreleased adopted jobs in step with their Slurm jobs."""
        # a cancelled job is looked at only while its Slurm job still waits: the rows stay bounded
        waiting_in_slurm = [job_id for job_id, job in jobs.items() if job.state == "PENDING"]
        with self.db.session() as session:
            rows = session.execute(
                select(AdoptedJob.slurm_job_id, Job, Task, Attempt)
                .join(Job, Job.id == AdoptedJob.job_id)
                .join(Task, Task.job_id == Job.id)
                .outerjoin(Attempt, (Attempt.task_id == Task.id) & Attempt.state.in_(_LIVE))
                .where(
                    (Task.state == TaskState.PENDING.value)
                    | (Attempt.state == AttemptState.LAUNCHING.value)
                    | ((Task.state == TaskState.CANCELLED.value) & among(session, AdoptedJob.slurm_job_id, waiting_in_slurm))
                )
            ).all()
            waiting = [(slurm_id, job.short_id, task.id) for slurm_id, job, task, attempt in rows
                       if task.state == TaskState.PENDING.value and attempt is None]  # fmt: skip
            reasons = self._reasons(session, [task_id for _, _, task_id in waiting])
        for slurm_id, job, task, attempt in rows:
            seen = jobs.get(slurm_id)
            if attempt is not None:
                if seen is not None and held_in(seen, self.partitions):
                    self._release(slurm_id, attempt.id, attempt.nodes(), result)  # the last release did not take
            elif task.state == TaskState.CANCELLED.value:
                if seen is not None and seen.state == "PENDING":
                    self._scancel(slurm_id, result)
            elif seen is None or seen.state != "PENDING":
                # cancelled (scancel), gone, or started by someone else's release: not metasched's to place
                self._cancelled_in_slurm(leadership, job.id, slurm_id, seen, result)
        for slurm_id, short_id, task_id in waiting:
            if slurm_id in jobs and jobs[slurm_id].state == "PENDING":
                code, message = reasons.get(task_id, (None, ""))
                self._comment(slurm_id, waiting_comment(short_id, code, message))

    @staticmethod
    def _reasons(session: Session, task_ids: list[str]) -> dict[str, tuple[str, str]]:
        rows = session.execute(
            select(TaskReason.task_id, TaskReason.code, TaskReason.message).where(among(session, TaskReason.task_id, task_ids))
        ).all()
        return {row.task_id: (row.code, row.message) for row in rows}

    def _cancelled_in_slurm(
        self, leadership: Leadership, job_id: str, slurm_id: str, seen: SqueueJob | None, result: AdoptResult
    ) -> None:
        """_cancelled_in_slurm ends a waiting adopted job whose Slurm job was cancelled (scancel) or is gone."""
        state = seen.state if seen is not None else "gone"
        with self.db.session() as session:
            fence(session, leadership)
            job = session.get(Job, job_id)
            if job is None or job.cancel_requested:
                return
            who = seen.user_name if seen is not None and seen.user_name else "slurm"
            audit.record(session, ACTOR, "job.cancel", job.short_id, tenant=job.tenant, via="scancel",
                         slurm_job_id=slurm_id, slurm_state=state)  # fmt: skip
            cancel_job(session, job, ACTOR, reason=f"Slurm job {slurm_id} {state} while waiting for metasched")
        log.info("adopted Slurm job %s is %s (job of %s): metasched job cancelled", slurm_id, state, who)
        result.cancelled.append(job_id)

    def _scancel(self, slurm_id: str, result: AdoptResult) -> None:
        try:
            self.client.cancel([slurm_id])
            result.scancelled.append(slurm_id)
        except SlurmError as exc:
            log.warning("cannot cancel held Slurm job %s: %s", slurm_id, exc)

    # --- step 13 ------------------------------------------------------------------------------

    def release_created(self, leadership: Leadership) -> AdoptResult:
        """release_created releases every new attempt of an adopted job onto its nodes (instead of sbatch)."""
        result = AdoptResult()
        if not self.partitions:
            return result
        with self.db.session() as session:
            fence(session, leadership)
            created = dict(
                session.execute(
                    select(Attempt.id, AdoptedJob.slurm_job_id)
                    .join(AdoptedJob, AdoptedJob.job_id == Attempt.job_id)
                    .where(Attempt.state == AttemptState.CREATED.value)
                ).all()
            )
            moved = mark_launching(session, list(created), AttemptState.CREATED, actor=ACTOR) if created else []
            now = utcnow()
            targets = []
            for attempt_id in moved:
                attempt = session.get(Attempt, attempt_id, populate_existing=True)
                assert attempt is not None
                # the Slurm id is known before the release: the reconciler never relaunches it by sbatch
                attempt.slurm_job_id, attempt.last_seen_at = created[attempt_id], now
                targets.append((created[attempt_id], attempt_id, attempt.nodes()))
        for slurm_id, attempt_id, nodes in targets:
            self._release(slurm_id, attempt_id, nodes, result)
        return result

    def _release(self, slurm_id: str, attempt_id: str, nodes: list[str], result: AdoptResult) -> None:
        """_release puts the held job on the chosen nodes with the attempt's tag and releases it (idempotent)."""
        try:
            self.client.release_held(slurm_id, nodes, tags.comment(self.site, attempt_id))
        except SlurmError as exc:
            log.warning("cannot release Slurm job %s (attempt %s): %s; again next period", slurm_id, attempt_id, exc)
            return
        self._comments.pop(slurm_id, None)
        result.released.append(slurm_id)
        log.info("released Slurm job %s onto %s (attempt %s)", slurm_id, ",".join(sorted(set(nodes))), attempt_id)


def store_adopted(session: Session, job: HeldJob, spec: TrainingSpec) -> str:
    """store_adopted stores the metasched job of a held Slurm job, owned by its user, and audits it; returns its short id."""
    owner = SlurmOwner(job.user, job.uid, job.gid, job.work_dir or None)
    stored = store_adopted_job(session, spec, owner, str(job.job_id), job.submitted_at, utcnow())
    audit.record(session, ACTOR, "job.adopt", stored.short_id, tenant=job.account, slurm_job_id=str(job.job_id),
                 user=job.user, uid=job.uid)  # fmt: skip
    return stored.short_id
