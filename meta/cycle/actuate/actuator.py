"""Cycle step 13, actuate: launch new attempts on Slurm and stop the ones marked for stopping.

Launch protocol, safe against crashes and ambiguous outcomes:
1. commit ``created -> launching`` (fenced by the leader epoch) *before* calling sbatch;
2. call sbatch with the attempt's tag ``--comment=metasched:site=<site>:attempt=<id>`` (the job name is the user's);
3. record the Slurm job id — or, if sbatch timed out or failed transiently, ``launch_unknown``:
   the reconciler looks the job up by its tag before anything is submitted again.
Attempts go in batches (one commit per step per batch, a few sbatch calls in flight), so a burst
of placements costs a handful of transactions rather than several per attempt. The daemon runs
these batches behind the period, in its launch pool (``launch_pool.py``).
A crash between 1 and 3 leaves ``launching`` without a Slurm id, which the reconciler treats
exactly like ``launch_unknown``.
"""

from __future__ import annotations

import logging
import threading
from collections.abc import Callable
from concurrent.futures import Executor, ThreadPoolExecutor
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta
from pathlib import Path

from sqlalchemy import select, update
from sqlalchemy.orm import Session

from checkpoint import attempt_secret
from meta.cycle.actuate.launch_plan import LaunchSettings, launch_request, run_as_for
from meta.cycle.lease import Leadership, NotLeader, fence, lock_lease_row
from meta.cycle.snapshot.build import SpecCache
from meta.model.durations import utcnow
from meta.model.errors import JOB_FAULTS
from meta.model.kinds import FailureCategory
from meta.model.spec import TrainingSpec
from meta.model.states import AttemptState
from meta.store.chunks import among, chunked
from meta.store.db import Database
from meta.store.lifecycle import attempt_event, mark_launching, quarantine_attempt
from meta.store.models import Attempt, Checkpoint, Job, Task
from meta.store.site import ensure_site_id
from slurm_bridge.client import SlurmClient
from slurm_bridge.errors import SlurmError, SlurmRejected, SlurmUnknownOutcome
from slurm_bridge.launch import LaunchRequest, LaunchRequestError, RunAs
from slurm_bridge.render import render

log = logging.getLogger("metasched.actuator")
Prepared = tuple[str, int, str, RunAs | None]  # attempt id, fencing token, script, the user it runs as
LAUNCH_BATCH = 32  # attempts marked "launching" per commit
SUBMIT_PARALLEL = 4  # default sbatch calls in flight at once (slurmctld serialises them anyway)



@dataclass
class ActuationResult:
    """ActuationResult counts what one actuation pass did."""

    launched: list[str] = field(default_factory=list)
    unknown: list[str] = field(default_factory=list)
    rejected: list[str] = field(default_factory=list)
    signalled: list[str] = field(default_factory=list)
    cancelled: list[str] = field(default_factory=list)


def latest_checkpoint_path(session: Session, task_id: str) -> str | None:
    """latest_checkpoint_path is the newest checkpoint a task reported (its next attempt resumes there)."""
    return session.scalar(
        select(Checkpoint.path).where(Checkpoint.task_id == task_id).order_by(Checkpoint.step.desc()).limit(1)
    )


def record_slurm_job_id(session: Session, attempt_id: str, token: int, slurm_job_id: str) -> bool:
    """record_slurm_job_id stores the Slurm id of a launched attempt, fenced by its token."""
    result = session.execute(
        update(Attempt)
        .where(
            Attempt.id == attempt_id,
            Attempt.fencing_token == token,
            Attempt.state.in_([AttemptState.LAUNCHING.value, AttemptState.LAUNCH_UNKNOWN.value]),
        )
        .values(slurm_job_id=slurm_job_id, last_seen_at=utcnow(), version=Attempt.version + 1)
    )
    return result.rowcount == 1


def _prepare_dirs(request: LaunchRequest) -> None:
    """_prepare_dirs creates the log and staging directories: Slurm fails a job whose --output dir is missing."""
    for path in (Path(request.stdout).parent if request.stdout else None, request.output_dir):
        if path:
            try:
                Path(path).mkdir(parents=True, exist_ok=True)
            except OSError as exc:  # on a cluster the job's node may see a path this host cannot
                log.warning("cannot create %s: %s", path, exc)


class Actuator:
    """Actuator turns committed decisions into sbatch and scancel calls."""

    def __init__(
        self,
        db: Database,
        client: SlurmClient,
        specs: SpecCache,
        settings: LaunchSettings | None = None,
        *,
        submit_timeout_s: float = 30.0,
        submit_parallel: int = SUBMIT_PARALLEL,
    ):
        self.db = db
        self.client = client
        self.specs = specs
        self.settings = settings or LaunchSettings()
        if self.settings.site is None:  # every job's tag names the store's site
            self.settings = replace(self.settings, site=ensure_site_id(db))
        self.submit_timeout_s = submit_timeout_s
        self.submit_parallel = max(1, submit_parallel)
        self.cancel_resend_s = 15.0
        # when scancel was last sent per attempt: only a throttle, never a source of truth
        self._cancel_sent: dict[str, datetime] = {}
        # called before each sbatch with the epoch the batch was marked under: the daemon renews
        # its leader lease there, and raises NotLeader once that epoch is no longer its own
        self.keep_lease: Callable[[Leadership], None] | None = None

    # --- launches -----------------------------------------------------------------------------

    def launch_created(self, leadership: Leadership, result: ActuationResult) -> None:
        """launch_created sends every ``created`` attempt to Slurm."""
        with self.db.session() as session:
            ids = list(session.scalars(select(Attempt.id).where(Attempt.state == AttemptState.CREATED.value)))
        self.launch_many(ids, leadership, result, from_state=AttemptState.CREATED)

    def launch(
        self, attempt_id: str, leadership: Leadership, result: ActuationResult, *, from_state: AttemptState
    ) -> None:
        """launch runs the launch protocol for one attempt (also used to relaunch a confirmed-absent one)."""
        self.launch_many([attempt_id], leadership, result, from_state=from_state)

    def launch_many(
        self,
        ids: list[str],
        leadership: Leadership,
        result: ActuationResult,
        *,
        from_state: AttemptState,
        stop: threading.Event | None = None,
        executor: Executor | None = None,
    ) -> None:
        """launch_many launches in batches: one fenced commit marks a batch launching, its sbatch
        calls run a few at a time (on ``executor`` if given), one commit records what Slurm answered.

        Once ``stop`` is set no further sbatch goes out: the batch's unsent attempts stay
        ``launching`` without a Slurm id, looked up like unknown launches.
        """
        for batch in chunked(ids, LAUNCH_BATCH):
            if stop is not None and stop.is_set():
                return
            if self.keep_lease is not None:
                self.keep_lease(leadership)
            prepared = self._mark_launching(list(batch), leadership, from_state, result)
            self._record(self._submit_all(prepared, leadership, stop, executor), result)

    def _mark_launching(
        self, ids: list[str], leadership: Leadership, from_state: AttemptState, result: ActuationResult
    ) -> list[Prepared]:
        """_mark_launching commits ``launching`` for a batch (fenced) and renders each script."""
        prepared = []
        with self.db.session() as session:
            fence(session, leadership)
            moved = mark_launching(session, ids, from_state)
            rows = self._load_rows(session, moved)  # held here: the session's identity map keeps rows only weakly
            for attempt_id in moved:
                try:
                    with session.begin_nested():
                        script, token, run_as = self._script(session, attempt_id)
                except (LaunchRequestError, *JOB_FAULTS) as exc:
                    # a job whose data cannot become a script can never launch: quarantine it (never
                    # retried) and launch the rest of the batch
                    log.warning("attempt %s cannot be rendered: %s", attempt_id, exc)
                    quarantine_attempt(session, attempt_id, f"cannot render the sbatch script: {exc}", actor="actuator")
                    result.rejected.append(attempt_id)
                    continue
                prepared.append((attempt_id, token, script, run_as))
            del rows
        return prepared

    def _submit_all(
        self,
        prepared: list[Prepared],
        leadership: Leadership,
        stop: threading.Event | None = None,
        executor: Executor | None = None,
    ) -> list[tuple[str, int, int | SlurmError | None]]:
        """_submit_all runs sbatch for each prepared attempt, ``submit_parallel`` at a time."""

        deposed = threading.Event()  # set once this replica lost the lease: send nothing more
        gate = threading.Lock()  # lease checks run one at a time; sbatch calls still overlap

        def submit(item: Prepared) -> tuple[str, int, int | SlurmError | None]:
            attempt_id, token, script, run_as = item
            with gate:
                try:
                    if not deposed.is_set() and self.keep_lease is not None:
                        self.keep_lease(leadership)  # slow sbatch calls must not let the leader lease lapse
                except NotLeader:
                    deposed.set()
                if deposed.is_set() or (stop is not None and stop.is_set()):
                    return attempt_id, token, None  # never sent: stays "launching", looked up like an unknown
            try:
                return attempt_id, token, self.client.submit(script, timeout_s=self.submit_timeout_s, run_as=run_as)
            except SlurmError as exc:
                return attempt_id, token, exc
            except Exception as exc:  # noqa: BLE001 - one launch's surprise must not drop the batch's ids
                log.exception("sbatch for attempt %s failed unexpectedly: looked up as an unknown", attempt_id)
                return attempt_id, token, SlurmUnknownOutcome(f"{type(exc).__name__}: {exc}", command="sbatch")

        if executor is not None:
            outcomes = list(executor.map(submit, prepared))
        else:
            with ThreadPoolExecutor(max_workers=self.submit_parallel) as pool:
                outcomes = list(pool.map(submit, prepared))
        if deposed.is_set():
            self._record(outcomes, ActuationResult())  # what did go out is still recorded
            raise NotLeader("the leader lease was lost while launching")
        return outcomes

    def _record(self, outcomes: list[tuple[str, int, int | SlurmError | None]], result: ActuationResult) -> None:
        """_record stores Slurm ids, rejections and unknown outcomes of one batch in one commit.

        Fenced by each attempt's token, not by the epoch: what went out is recorded even by a
        replica that just lost the lease. The lease row's lock is still taken first, so this
        commit (made behind the period, by the launch pool) queues behind the period's fenced
        transactions on the same attempts instead of deadlocking with them.
        """
        if all(outcome is None for _, _, outcome in outcomes):
            return
        with self.db.session() as session:
            lock_lease_row(session)
            for attempt_id, token, outcome in outcomes:
                if outcome is None:
                    continue  # not sent: left "launching" for the reconciler to look up
                if isinstance(outcome, SlurmRejected):
                    self._launch_rejected(session, attempt_id, token, outcome, result)
                elif isinstance(outcome, SlurmError):
                    self._launch_unknown(session, attempt_id, token, outcome, result)
                else:
                    record_slurm_job_id(session, attempt_id, token, str(outcome))
                    result.launched.append(attempt_id)
                    log.info("launched attempt %s as Slurm job %s", attempt_id, outcome)

    @staticmethod
    def _load_rows(session: Session, attempt_ids: list[str]) -> list[object]:
        """_load_rows reads a batch's attempts, tasks and jobs in three queries (not three per attempt).

        The caller keeps the returned rows while it works: the session's identity map holds rows
        only weakly, and rows nobody references are collected and read again one by one.
        """
        attempts = session.scalars(
            select(Attempt).where(among(session, Attempt.id, attempt_ids)).execution_options(populate_existing=True)
        ).all()
        tasks = session.scalars(select(Task).where(among(session, Task.id, {a.task_id for a in attempts}))).all()
        jobs = session.scalars(select(Job).where(among(session, Job.id, {a.job_id for a in attempts}))).all()
        return [*attempts, *tasks, *jobs]

    def _script(self, session: Session, attempt_id: str) -> tuple[str, int, RunAs | None]:
        """_script renders one attempt's sbatch script from rows already in the session, and whom it runs as."""
        attempt = session.get(Attempt, attempt_id)
        assert attempt is not None
        task = session.get(Task, attempt.task_id)
        job = session.get(Job, attempt.job_id)
        assert task is not None and job is not None
        spec = self.specs.get(session, job.id)
        resume = latest_checkpoint_path(session, task.id) if isinstance(spec, TrainingSpec) else None
        # a new secret per launch, committed (as its digest) with "launching" before sbatch runs;
        # a relaunch after a confirmed-absent launch gets a new one
        secret, attempt.secret_hash = attempt_secret.new_secret()
        request = launch_request(job, task, attempt, spec, self.settings, resume_from=resume, attempt_secret=secret)
        run_as = run_as_for(job, self.settings, spec)
        if run_as is None:
            # a job of another user makes its own folders, as that user: root creating folders
            # where a user's paths point would follow that user's symlinks with root's rights
            _prepare_dirs(request)
        script = render(request)
        script.encode("utf-8")  # a lone surrogate would reach sbatch as an empty script: refuse it here
        return script, attempt.fencing_token, run_as

    def _launch_rejected(
        self, session: Session, attempt_id: str, token: int, exc: SlurmError, result: ActuationResult
    ) -> None:
        attempt_event(
            session,
            attempt_id,
            AttemptState.FAILED,
            f"launch-rejected:{attempt_id}:{token}",
            reason=f"Slurm rejected the job: {exc}"[:500],
            actor="actuator",
            fencing_token=token,
            failure_category=FailureCategory.LAUNCH_FAILURE,
        )
        result.rejected.append(attempt_id)
        log.warning("Slurm rejected attempt %s: %s", attempt_id, exc)

    def _launch_unknown(
        self, session: Session, attempt_id: str, token: int, exc: SlurmError, result: ActuationResult
    ) -> None:
        attempt = session.get(Attempt, attempt_id, populate_existing=True)
        if attempt is None or attempt.state != AttemptState.LAUNCHING.value:
            return
        attempt_event(
            session,
            attempt_id,
            AttemptState.LAUNCH_UNKNOWN,
            f"launch-unknown:{attempt_id}:{attempt.version}",
            reason=f"sbatch outcome unknown: {exc}"[:500],
            actor="actuator",
            fencing_token=token,
            # the look-up window counts from when sbatch gave up, not from when the batch was
            # marked: in a batch of slow calls the last one may start long after the mark
            values={"launch_sent_at": utcnow()},
        )
        result.unknown.append(attempt_id)
        log.warning("launch of attempt %s has an unknown outcome: %s", attempt_id, exc)

    # --- stops --------------------------------------------------------------------------------

    def stop_requested(self, leadership: Leadership, result: ActuationResult) -> None:
        """stop_requested signals or cancels every ``stopping`` attempt whose Slurm job is known.

        A preempted training job that checkpoints first gets USR1 and ``grace_s`` to write a
        checkpoint; everything else is cancelled at once. scancel is idempotent, so it is resent
        (throttled) until the reconciler sees the job end.
        """
        now = utcnow()
        with self.db.session() as session:
            rows = list(
                session.scalars(
                    select(Attempt).where(
                        Attempt.state == AttemptState.STOPPING.value, Attempt.slurm_job_id.is_not(None)
                    )
                )
            )
            stops = [
                (
                    a.id,
                    str(a.slurm_job_id),
                    a.stop_reason == "preempt" and self._checkpoints(session, a.job_id),
                    a.stop_signalled_at,
                )
                for a in rows
            ]
        for attempt_id, slurm_id, graceful, signalled_at in stops:
            if graceful and signalled_at is None:
                self._signal(attempt_id, slurm_id, leadership, result)
            elif not graceful or now - signalled_at >= timedelta(seconds=self.settings.grace_s):
                self._cancel(attempt_id, slurm_id, result, now)

    def _checkpoints(self, session: Session, job_id: str) -> bool:
        spec = self.specs.get(session, job_id)
        return isinstance(spec, TrainingSpec) and spec.checkpoint is not None

    def _signal(
        self, attempt_id: str, slurm_id: str, leadership: Leadership, result: ActuationResult
    ) -> None:
        """_signal asks a training job to checkpoint now (USR1); it is cancelled after the grace period."""
        try:
            self.client.cancel([slurm_id], signal="USR1")
        except SlurmError as exc:
            # not recorded as sent: the next period signals again, so the job still gets to checkpoint
            log.warning("could not signal Slurm job %s: %s", slurm_id, exc)
            return
        with self.db.session() as session:
            fence(session, leadership)
            session.execute(update(Attempt).where(Attempt.id == attempt_id).values(stop_signalled_at=utcnow()))
        result.signalled.append(attempt_id)

    def _cancel(self, attempt_id: str, slurm_id: str, result: ActuationResult, now: datetime) -> None:
        """_cancel sends scancel (at most once per resend interval per attempt)."""
        last = self._cancel_sent.get(attempt_id)
        if last is not None and (now - last).total_seconds() < self.cancel_resend_s:
            return
        try:
            self.client.cancel([slurm_id])
            self._cancel_sent[attempt_id] = now
            result.cancelled.append(attempt_id)
        except SlurmError as exc:
            log.warning("could not cancel Slurm job %s: %s", slurm_id, exc)
