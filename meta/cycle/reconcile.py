"""Cycle step 3, reconcile: move attempts by what Slurm reports, never by guesses.

Each period reads Slurm in a fixed number of batched calls — one ``squeue`` and, only
when some live attempt is missing from it, one ``sacct -P`` (sinfo is read by the daemon for the
inventory) — however many jobs there are. squeue lists ended jobs too for ``MinJobAge``, so in
a steady period accounting (slurmdbd, the slowest read) has nothing to add and is skipped.
Jobs are matched to attempts by their tag (the comment; ``ms-<attempt>`` names of older jobs),
never by Slurm job id alone. If a read fails, nothing is concluded: errors are unknowns, not job failures.

Per live attempt:
- seen (squeue, else sacct): record the Slurm id, renew the lease, follow the state;
- not seen, launch outcome unknown (``launch_unknown``, or ``launching`` without a Slurm id):
  after ``unknown_window_s`` with no trace in squeue *and* sacct the launch is confirmed absent
  and the *same* attempt is submitted again (same tag: idempotent by tag);
- not seen but launched before: ``lost`` after ``lost_grace_s`` without a sighting;
- not seen while this replica's launch pool still has it queued or in flight (``in_flight``):
  nothing is concluded — its sbatch may not have run yet — until the pool recorded the outcome.
Jobs tagged by metasched with no live attempt are orphans and are cancelled (I2).
A job cancelled in Slurm that metasched did not ask to stop is a user's cancel when accounting
names someone allowed to cancel it (``CANCELLED by <uid>``: its owner, a coordinator of its
tenant, an admin): the metasched job is cancelled in that user's name and audited. A cancel
nobody can be named for (slurmctld's own, an unknown uid, no accounting record after
``cancel_attribution_s``) makes the attempt ``lost``, retried under its policy.
"""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection, Iterable
from dataclasses import dataclass, field
from datetime import datetime, timedelta

from sqlalchemy import Row, func, or_, select, update
from sqlalchemy.orm import Session

from meta.cycle.cancellers import Canceller
from meta.cycle.lease import Leadership, fence
from meta.model.durations import utcnow
from meta.model.errors import JOB_FAULTS, ConcurrentModification, StaleFencingToken, invalid_spec_reason
from meta.model.kinds import FailureCategory
from meta.model.spec import TrainingSpec
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, IllegalTransition
from meta.store import audit
from meta.store.chunks import chunked
from meta.store.db import Database
from meta.store.lifecycle import attempt_event, cancel_job, job_spec, move_attempts, quarantine_attempt
from meta.store.models import Attempt, Job, PartitionCommit, Task, Transition
from slurm_bridge.client import SlurmClient
from slurm_bridge.errors import SlurmError
from slurm_bridge.parse.sacct import SacctJob
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.render import CHECKPOINT_SIGNAL
from slurm_bridge.states import Observed, Outcome, killed_by, map_state
from slurm_bridge.tags import parse_tag

log = logging.getLogger("metasched.reconciler")
_CHUNK = 1000  # attempts per reconcile transaction (steady ones cost a row read each)
SuccessHook = Callable[[Session, Attempt], None]
_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]
_WAIT = object()  # a cancel whose canceller accounting may still name: decide next period
# moves of a clean start or a clean finish, made for many attempts at once
_CLEAN_MOVES = frozenset({AttemptState.RUNNING, AttemptState.SUCCEEDED})
_GroupKey = tuple[AttemptState, AttemptState, str, "int | None"]


# ends that send a task back for another attempt (unless it has run out of retries)
_RETRIED_ENDS = frozenset({AttemptState.LOST, AttemptState.PREEMPTED, AttemptState.FAILED})
# the reason of an attempt killed by the checkpoint signal metasched asked for; also how such
# ends are counted (``_signal_kills``)
SIGNAL_KILL_REASON = (
    f"killed by the checkpoint signal {CHECKPOINT_SIGNAL} that metasched asked Slurm to send; "
    "the program does not trap it"
)


def committed_its_output(session: Session, attempt: Attempt) -> bool:
    """committed_its_output tells whether the attempt's partition output is committed, by this attempt."""
    commit = session.get(PartitionCommit, attempt.task_id)
    return commit is not None and commit.attempt_id == attempt.id


@dataclass(frozen=True)
class ReconcileSettings:
    """ReconcileSettings bound how long metasched waits before concluding from silence."""

    unknown_window_s: float = 15.0  # sacct is asynchronous: give a just-submitted job time to show
    lost_grace_s: float = 120.0
    lease_s: float = 300.0
    # a steady attempt's sighting and lease are written at most this often (not every period:
    # at 10,000 running jobs that UPDATE was a large part of a period); the reconciler remembers
    # the sightings in between, so "lost" still counts from the last one
    renew_every_s: float = 30.0
    sacct_lookback_s: float = 6 * 3600.0
    # slurmdbd is asynchronous: how long a cancel seen in squeue waits for sacct to say who
    cancel_attribution_s: float = 30.0


@dataclass(frozen=True)
class Sighting:
    """Sighting is one Slurm job seen for an attempt: its id, nodes and mapped state."""

    slurm_job_id: str
    observed: Observed
    nodes: tuple[str, ...]
    source: str  # "squeue" | "sacct"
    cancelled_by: int | None = None  # sacct's ``CANCELLED by <uid>``


@dataclass
class Observation:
    """Observation is one period's batched read of Slurm, indexed by attempt id."""

    at: datetime
    squeue: dict[str, list[Sighting]] = field(default_factory=dict)
    sacct: dict[str, list[Sighting]] = field(default_factory=dict)
    calls: int = 0
    accounting_read: bool = True  # False: sacct was skipped, so no attempt may be concluded absent

    def sightings(self, attempt_id: str) -> list[Sighting]:
        """sightings are the attempt's jobs in squeue, else in sacct."""
        return self.squeue.get(attempt_id) or self.sacct.get(attempt_id) or []

    def accounted(self, attempt_id: str, slurm_job_id: str) -> Sighting | None:
        """accounted is sacct's record of one job of the attempt (None: not read, or not there yet)."""
        return next((s for s in self.sacct.get(attempt_id, []) if s.slurm_job_id == slurm_job_id), None)


@dataclass
class ReconcileResult:
    """ReconcileResult counts what one reconcile pass did."""

    transitions: int = 0
    slurm_reads: int = 0  # squeue, and sacct when it was needed
    relaunch: list[str] = field(default_factory=list)  # attempts confirmed absent: submit again
    orphans_cancelled: list[str] = field(default_factory=list)
    duplicates_cancelled: list[str] = field(default_factory=list)
    lost: list[str] = field(default_factory=list)


def _stimulus(slurm_job_id: str, observed: Observed, target: AttemptState) -> str:
    """_stimulus names a move a Slurm report caused; the same report never moves an attempt twice."""
    return f"slurm:{slurm_job_id}:{observed.slurm_state}:{target.value}"


def _index_squeue(jobs: Iterable[SqueueJob]) -> dict[str, list[Sighting]]:
    index: dict[str, list[Sighting]] = {}
    for job in jobs:
        if job.het_job_offset not in (None, 0):
            continue  # a het-job is followed through its leader component
        tag = parse_tag(job.name, job.comment)
        if tag is None:
            continue
        observed = map_state(job.state, job.exit_code, job.signal)
        index.setdefault(tag.attempt_id, []).append(Sighting(str(job.job_id), observed, job.nodes, "squeue"))
    return index


def _index_sacct(records: Iterable[SacctJob]) -> dict[str, list[Sighting]]:
    index: dict[str, list[Sighting]] = {}
    for record in records:
        if record.step is not None or record.het_offset not in (None, 0):
            continue
        tag = parse_tag(record.name, record.comment)
        if tag is None:
            continue
        index.setdefault(tag.attempt_id, []).append(
            Sighting(str(record.base_job_id), record.observed, record.nodes, "sacct", record.state_by_uid)
        )
    return index


def observe(
    client: SlurmClient, since: datetime | Callable[[], datetime], live_ids: Iterable[str] | None = None
) -> Observation:
    """observe reads squeue, then sacct unless every one of ``live_ids`` is in squeue (None: always).

    Raises SlurmError if a read fails. ``since`` may be a callable: the sacct window is then
    worked out only when sacct is read.
    """
    now = utcnow()
    observation = Observation(at=now, squeue=_index_squeue(client.squeue()), calls=1)
    # a cancel seen in squeue is read in accounting too: only sacct says who cancelled
    if live_ids is not None and all(
        attempt_id in observation.squeue and not _cancelled(observation.squeue[attempt_id]) for attempt_id in live_ids
    ):
        observation.accounting_read = False
        return observation
    start = since() if callable(since) else since
    observation.sacct = _index_sacct(client.sacct(start))
    observation.calls += 1
    return observation


def _cancelled(sightings: list[Sighting]) -> bool:
    """_cancelled: one of the sightings is a job Slurm cancelled."""
    return any(s.observed.outcome == Outcome.CANCELLED for s in sightings)


def _signal_kills(session: Session, task_id: str) -> int:
    """_signal_kills counts the task's earlier attempts that the checkpoint signal killed."""
    return session.scalar(
        select(func.count())
        .select_from(Transition)
        .join(Attempt, Attempt.id == Transition.entity_id)
        .where(
            Attempt.task_id == task_id,
            Transition.entity == "attempt",
            Transition.to_state == AttemptState.PREEMPTED.value,
            Transition.reason.contains(SIGNAL_KILL_REASON, autoescape=True),
        )
    ) or 0


def _signal_kill_end(
    session: Session, attempt: Attempt, where: str
) -> tuple[AttemptState, FailureCategory, str]:
    """_signal_kill_end is how an attempt the checkpoint signal killed ends: preempted, not the user's failure.

    A preemption is requeued without spending the task's retry budget, so a program that never
    traps the signal would be killed and requeued for ever: after ``max_attempts`` such ends
    (the retry policy's own bound) the task fails instead, still not as the user's error.
    """
    reason = f"{where}: {SIGNAL_KILL_REASON}"
    kills = _signal_kills(session, attempt.task_id) + 1
    log.warning("attempt %s (Slurm job %s) %s", attempt.id, attempt.slurm_job_id, reason)
    if kills < job_spec(session, attempt.job_id).retry.max_attempts:
        return AttemptState.PREEMPTED, FailureCategory.PREEMPTED, reason
    return AttemptState.FAILED, FailureCategory.UNKNOWN, f"{reason} ({kills} attempts; not requeued again)"


class Reconciler:
    """Reconciler moves attempts through their state machine from Slurm's reports."""

    def __init__(
        self,
        db: Database,
        client: SlurmClient,
        settings: ReconcileSettings | None = None,
        on_success: SuccessHook | None = None,
        cancellers: Callable[[int], Canceller | None] | None = None,
        in_flight: Callable[[], Collection[str]] | None = None,
    ):
        self.db = db
        self.client = client
        self.settings = settings or ReconcileSettings()
        # who a ``CANCELLED by <uid>`` was (None: no cancel is attributed, every one is lost)
        self.cancellers = cancellers
        # when an unrequested cancel was first seen without its canceller (waiting for slurmdbd);
        # only a wait: a restart waits again
        self._unattributed: dict[str, datetime] = {}
        # when each live attempt was last seen, where the store's last_seen_at may be up to twice
        # renew_every_s older; only memory: a new leader counts from the stored sighting
        self._sighted_at: dict[str, datetime] = {}
        self._stored_at: dict[str, datetime] = {}  # when this reconciler last wrote each one's sighting
        # called inside the transaction, before an attempt moves to succeeded (e.g. commit outputs)
        self.on_success = on_success
        # attempts this replica's launch pool has queued or sending: Slurm's silence says nothing yet
        self.in_flight = in_flight or frozenset
        self._sending: Collection[str] = frozenset()  # in_flight, read once per pass

    def since(self) -> datetime:
        """since is where the sacct window starts: before the oldest live attempt was launched."""
        floor = utcnow() - timedelta(seconds=self.settings.sacct_lookback_s)
        with self.db.session() as session:
            oldest = session.scalar(
                select(Attempt.created_at)
                .where(Attempt.state.in_(_LIVE))
                .order_by(Attempt.created_at)
                .limit(1)
            )
        start = (oldest - timedelta(minutes=5)) if oldest else utcnow() - timedelta(minutes=10)
        return max(start, floor)

    def run(self, leadership: Leadership) -> ReconcileResult:
        """run observes Slurm once and applies what it saw; a failed read changes nothing."""
        # read before Slurm is: a launch that ends after this read is recorded before it leaves the set
        self._sending = self.in_flight()
        # an attempt still being sent is never judged absent, so accounting is not read for it
        expected = [attempt_id for attempt_id in self._live_ids() if attempt_id not in self._sending]
        try:
            return self.apply(observe(self.client, self.since, expected), leadership)
        finally:
            self._sending = frozenset()

    def apply(self, observation: Observation, leadership: Leadership) -> ReconcileResult:
        """apply follows every live attempt and cancels orphans, from one observation.

        Attempts are handled in chunks, one fenced transaction per chunk and a savepoint per
        attempt: a period costs a few commits however many jobs run, and one attempt that lost a
        race (a user cancel at the same moment) is simply looked at again next period.
        """
        result = ReconcileResult(slurm_reads=observation.calls)
        live_ids = self._live_ids()  # read again: the observation may be older than this call
        for chunk in chunked(live_ids, _CHUNK):
            with self.db.session() as session:
                fence(session, leadership)
                steady, groups = self._classify(session, chunk, observation)
                done = set(steady)
                for key, stimuli in groups.items():
                    if self._move_together(session, key, stimuli, observation.at, result):
                        done.update(stimuli)
                for attempt_id in chunk:
                    if attempt_id not in done and self._can_judge(attempt_id, observation):
                        self._follow(session, attempt_id, observation, result)
                self._renew(session, steady, observation.at)
        still = set(live_ids)
        self._sighted_at = {a: at for a, at in self._sighted_at.items() if a in still}
        self._stored_at = {a: at for a, at in self._stored_at.items() if a in still}
        self._cancel_orphans(observation, set(live_ids), result)
        return result

    def _classify(
        self, session: Session, attempt_ids: list[str], observation: Observation
    ) -> tuple[list[str], dict[_GroupKey, dict[str, str]]]:
        """_classify finds the common cases a chunk can handle with a few statements.

        Steady: seen once, under the recorded Slurm id, in the state it is in — a period only
        renews its lease. Clean moves: the same, but started running or finished with exit 0 —
        moved in groups by (from, to, reason, exit code). Everything else (unseen, duplicated,
        not yet recorded, failed, preempted, cancelled) takes the one-at-a-time path.
        """
        rows = session.execute(
            select(Attempt.id, Attempt.state, Attempt.slurm_job_id, Attempt.stop_reason, Attempt.cancel_requested)
            .where(Attempt.id.in_(attempt_ids), Attempt.state.in_(_LIVE))
        )
        steady: list[str] = []
        groups: dict[_GroupKey, dict[str, str]] = {}
        for row in rows:
            sightings = observation.sightings(row.id)
            if len(sightings) != 1 or sightings[0].slurm_job_id != row.slurm_job_id:
                continue  # unseen, duplicated or not yet recorded: the full path decides
            observed = sightings[0].observed
            target, _, reason = self._target(row, observed)
            if target is None or target.value == row.state:
                steady.append(row.id)
            elif target in _CLEAN_MOVES and observed.exit_code in (None, 0):
                key = (AttemptState(row.state), target, reason, observed.exit_code)
                groups.setdefault(key, {})[row.id] = _stimulus(row.slurm_job_id, observed, target)
        return steady, groups

    def _move_together(
        self, session: Session, key: _GroupKey, stimuli: dict[str, str], now: datetime, result: ReconcileResult
    ) -> bool:
        """_move_together moves one group in bulk; False (nothing moved) sends it one by one."""
        from_state, target, reason, exit_code = key
        values: dict[str, object] = {**self._sighted(now)}
        if exit_code is not None and target not in LIVE_ATTEMPT_STATES:
            # squeue reports 0:0 for a running job: an exit code exists only once the attempt ended
            values["exit_code"] = exit_code
        try:
            with session.begin_nested():
                if target == AttemptState.SUCCEEDED and self.on_success is not None:
                    for attempt in session.scalars(select(Attempt).where(Attempt.id.in_(list(stimuli)))):
                        self.on_success(session, attempt)
                move_attempts(session, stimuli, from_state, target, reason=reason, actor="reconciler", values=values)
        except (ConcurrentModification, IllegalTransition, *JOB_FAULTS) as exc:
            # one attempt's bad data (e.g. in its success hook) must not hold the group: each is then
            # followed alone, where a poison attempt is quarantined
            log.info("bulk move of %d attempts to %s fell back to one by one: %s", len(stimuli), target.value, exc)
            return False
        result.transitions += len(stimuli)
        self._stored_at.update(dict.fromkeys(stimuli, now))
        return True

    def _live_ids(self) -> list[str]:
        """_live_ids are the attempts whose Slurm job metasched follows, read now."""
        with self.db.session() as session:
            return list(session.scalars(select(Attempt.id).where(Attempt.state.in_(_LIVE))))

    @staticmethod
    def _can_judge(attempt_id: str, observation: Observation) -> bool:
        """_can_judge: an attempt squeue missed is only judged once accounting was read too.

        It went live after the reads were planned (another replica's launch, a relaunch): the
        next period reads sacct for it rather than concluding "absent" from squeue alone.
        """
        return observation.accounting_read or attempt_id in observation.squeue

    def _renew(self, session: Session, attempt_ids: list[str], now: datetime) -> None:
        """_renew records a sighting and renews the lease of steady attempts whose stored one is due, in one statement."""
        if not attempt_ids:
            return
        due = now - timedelta(seconds=min(self.settings.renew_every_s, self.settings.lease_s / 3))
        stored = self._stored_at
        # only those this reconciler has not written lately are sent (the WHERE re-checks the store)
        candidates = [a for a in attempt_ids if (at := stored.get(a)) is None or at <= due]
        for attempt_id in attempt_ids:
            self._sighted_at[attempt_id] = now
        if not candidates:
            return
        session.execute(
            update(Attempt)
            .where(
                Attempt.id.in_(candidates),
                Attempt.state.in_(_LIVE),
                or_(Attempt.last_seen_at.is_(None), Attempt.last_seen_at <= due),
            )
            .values(**self._sighted(now))
        )
        for attempt_id in candidates:
            stored[attempt_id] = now  # written now, or found written within the interval

    def _sighted(self, now: datetime) -> dict[str, datetime]:
        """_sighted are the columns a sighting sets: when it was seen, and the lease it renews."""
        return {"last_seen_at": now, "lease_expires_at": now + timedelta(seconds=self.settings.lease_s)}

    # --- one attempt ----------------------------------------------------------------------------

    def _follow(self, session: Session, attempt_id: str, observation: Observation, result: ReconcileResult) -> None:
        try:
            with session.begin_nested():
                attempt = session.get(Attempt, attempt_id, populate_existing=True)
                if attempt is None or attempt.state not in _LIVE:
                    return
                sightings = observation.sightings(attempt_id)
                if sightings:
                    chosen = self._choose(attempt, sightings, result)
                    self._seen(session, attempt, chosen, observation, result)
                else:
                    self._unseen(session, attempt, observation.at, result)
        except (ConcurrentModification, IllegalTransition, StaleFencingToken) as exc:
            log.info("attempt %s changed while reconciling (%s): next period", attempt_id, exc)
        except JOB_FAULTS as exc:  # this attempt's own data broke its move: quarantine it, go on
            self._quarantine(session, attempt_id, exc, result)

    def _quarantine(self, session: Session, attempt_id: str, exc: Exception, result: ReconcileResult) -> None:
        """_quarantine fails an attempt whose job's data broke the reconciler (in its own savepoint)."""
        log.warning("attempt %s quarantined: %s", attempt_id, invalid_spec_reason(exc))
        with session.begin_nested():
            if quarantine_attempt(session, attempt_id, exc, actor="reconciler"):
                result.transitions += 1

    def _choose(self, attempt: Attempt, sightings: list[Sighting], result: ReconcileResult) -> Sighting:
        """_choose picks the attempt's own job; any other active job for the same attempt is a duplicate."""
        own = [s for s in sightings if s.slurm_job_id == attempt.slurm_job_id] or sorted(
            sightings, key=lambda s: int(s.slurm_job_id)
        )
        chosen = own[0]
        for other in sightings:
            if other.slurm_job_id != chosen.slurm_job_id and not other.observed.terminal:
                log.error("duplicate Slurm job %s for attempt %s: cancelling", other.slurm_job_id, attempt.id)
                self._scancel(other.slurm_job_id)
                result.duplicates_cancelled.append(other.slurm_job_id)
        return chosen

    def _seen(
        self, session, attempt: Attempt, sighting: Sighting, observation: Observation, result: ReconcileResult
    ) -> None:
        """_seen records the sighting, renews the lease and follows the job's state."""
        now = observation.at
        session.execute(
            update(Attempt)
            .where(Attempt.id == attempt.id, Attempt.fencing_token == attempt.fencing_token)
            .values(slurm_job_id=attempt.slurm_job_id or sighting.slurm_job_id, **self._sighted(now))
        )
        self._stored_at[attempt.id] = now
        session.refresh(attempt)
        target, category, reason = self._target(attempt, sighting.observed)
        if target is None or target.value == attempt.state:
            return
        actor = "reconciler"
        if target == AttemptState.LOST and sighting.observed.outcome == Outcome.CANCELLED:
            who = self._canceller(session, attempt, sighting, observation)
            if who is _WAIT:
                return
            if isinstance(who, Canceller):
                target, category, actor = AttemptState.CANCELLED, FailureCategory.CANCELLED, who.name
                reason = f"Slurm {sighting.observed.slurm_state} by {who.name} (scancel)"
                self._user_cancel(session, attempt, who, sighting.slurm_job_id)
        if target == AttemptState.FAILED and self._killed_by_our_signal(session, attempt, sighting.observed):
            target, category, reason = _signal_kill_end(session, attempt, reason)
        if target in _RETRIED_ENDS and committed_its_output(session, attempt):
            # the partition's one visible output is already this attempt's: the task's work is
            # done, and a retry could only be refused at its own commit
            target, category, reason = AttemptState.SUCCEEDED, None, f"{reason}, after its output was committed"
        values = {}
        if sighting.observed.exit_code is not None and target not in LIVE_ATTEMPT_STATES:
            values["exit_code"] = sighting.observed.exit_code
        if target == AttemptState.SUCCEEDED and self.on_success is not None:
            self.on_success(session, attempt)
        stimulus = _stimulus(sighting.slurm_job_id, sighting.observed, target)
        attempt_event(
            session,
            attempt.id,
            target,
            stimulus,
            reason=reason,
            actor=actor,
            fencing_token=attempt.fencing_token,
            failure_category=category,
            values=values,
        )
        if target == AttemptState.CANCELLED and actor != "reconciler" and not _is_array(session, attempt.job_id):
            job = session.get(Job, attempt.job_id)
            assert job is not None
            cancel_job(session, job, actor)  # the job's other tasks and attempts follow (an array's do not)
        result.transitions += 1

    def _canceller(
        self, session: Session, attempt: Attempt, sighting: Sighting, observation: Observation
    ) -> Canceller | object | None:
        """_canceller is who cancelled the attempt's job in Slurm, if allowed to; _WAIT while sacct may still say."""
        if self.cancellers is None:
            return None
        record = sighting if sighting.source == "sacct" else observation.accounted(attempt.id, sighting.slurm_job_id)
        if record is None or (record.cancelled_by is None and record.observed.outcome != Outcome.CANCELLED):
            first = self._unattributed.setdefault(attempt.id, observation.at)
            if (observation.at - first).total_seconds() < self.settings.cancel_attribution_s:
                return _WAIT  # slurmdbd has not recorded the cancel yet
            return None
        self._unattributed.pop(attempt.id, None)
        if record.cancelled_by is None:
            return None
        who = self.cancellers(record.cancelled_by)
        job = session.get(Job, attempt.job_id)
        if who is None or job is None or not who.may_cancel(job.tenant, job.owner_uid):
            log.warning("Slurm job %s was cancelled by uid %s, who may not cancel it: lost",
                        sighting.slurm_job_id, record.cancelled_by)  # fmt: skip
            return None
        return who

    @staticmethod
    def _user_cancel(session: Session, attempt: Attempt, who: Canceller, slurm_job_id: str) -> None:
        """_user_cancel marks the job cancelled by ``who`` and audits it, as ``metasched cancel`` would.

        An array element is its own Slurm job: scancel of it cancels that element only, as in Slurm.
        """
        job = session.get(Job, attempt.job_id)
        assert job is not None
        if _is_array(session, job.id):
            task = session.get(Task, attempt.task_id)
            audit.record(session, who.name, "job.cancel", job.short_id, tenant=job.tenant, via="scancel",
                         slurm_job_id=slurm_job_id, uid=who.uid, elements=[task.name if task else None])  # fmt: skip
            return
        if not job.cancel_requested:
            audit.record(session, who.name, "job.cancel", job.short_id, tenant=job.tenant,
                         via="scancel", slurm_job_id=slurm_job_id, uid=who.uid)  # fmt: skip
            job.cancel_requested = True
            job.version += 1

    @staticmethod
    def _killed_by_our_signal(session: Session, attempt: Attempt, observed: Observed) -> bool:
        """_killed_by_our_signal: the job died of the checkpoint signal, which metasched asked for.

        metasched asks for it only for jobs that declared a checkpoint (``--signal`` before the
        time limit, USR1 before a preemption), so for any other job the signal was not ours.
        """
        if not killed_by(observed, CHECKPOINT_SIGNAL):
            return False
        spec = job_spec(session, attempt.job_id)
        return isinstance(spec, TrainingSpec) and spec.checkpoint is not None

    @staticmethod
    def _target(
        attempt: Attempt | Row, observed: Observed
    ) -> tuple[AttemptState | None, FailureCategory | None, str]:
        """_target is the attempt state a Slurm observation implies (None: no move)."""
        state = AttemptState(attempt.state)
        outcome = observed.outcome
        where = f"Slurm {observed.slurm_state}"
        if outcome == Outcome.PENDING:
            return (
                (AttemptState.LAUNCHING, None, where)
                if state == AttemptState.LAUNCH_UNKNOWN
                else (None, None, "")
            )
        if outcome == Outcome.RUNNING:
            if state in (AttemptState.LAUNCHING, AttemptState.LAUNCH_UNKNOWN, AttemptState.CREATED):
                return AttemptState.RUNNING, None, where
            return None, None, ""
        if outcome == Outcome.UNKNOWN:
            return None, None, ""
        if attempt.stop_reason == "preempt" or outcome == Outcome.PREEMPTED:
            # asked to stop for a preemption: however it ended (it may checkpoint on USR1 and exit 0),
            # the task is not done — it goes back to pending and resumes from its checkpoint
            return AttemptState.PREEMPTED, FailureCategory.PREEMPTED, f"{where} after preemption"
        if outcome == Outcome.SUCCEEDED:
            return AttemptState.SUCCEEDED, None, f"{where} exit 0"
        if outcome == Outcome.CANCELLED:
            if attempt.cancel_requested:
                return AttemptState.CANCELLED, FailureCategory.CANCELLED, f"{where} (as requested)"
            # cancelled in Slurm behind metasched's back (an operator's scancel, a controller
            # purge): nobody asked metasched to cancel the task, so its attempt is lost and the
            # task is retried under its policy (``lost`` is retried by default) — it does not end
            return AttemptState.LOST, FailureCategory.LOST, f"{where} outside metasched"
        code = f" exit {observed.exit_code}" if observed.exit_code is not None else ""
        return AttemptState.FAILED, observed.category or FailureCategory.UNKNOWN, f"{where}{code}"

    def _unseen(self, session, attempt: Attempt, now: datetime, result: ReconcileResult) -> None:
        """_unseen handles an attempt Slurm shows nothing of: confirm absence, relaunch, or lose it."""
        state = AttemptState(attempt.state)
        if state == AttemptState.CREATED or attempt.id in self._sending:
            return  # not sent yet, or this replica's sbatch for it has not returned: no conclusion
        sent = attempt.launch_sent_at or attempt.created_at
        quiet_s = (now - sent).total_seconds()
        if attempt.slurm_job_id is None and state in (AttemptState.LAUNCHING, AttemptState.LAUNCH_UNKNOWN):
            if quiet_s < self.settings.unknown_window_s:
                return  # squeue shows a job at once, but sacct lags: wait the window out
            if state == AttemptState.LAUNCHING:
                # a crash between "launching" and the recorded Slurm id: same as an unknown outcome
                attempt_event(
                    session,
                    attempt.id,
                    AttemptState.LAUNCH_UNKNOWN,
                    f"unknown:{attempt.id}:{attempt.version}",
                    reason="launch interrupted before its Slurm id was recorded",
                    actor="reconciler",
                    fencing_token=attempt.fencing_token,
                )
                result.transitions += 1
            result.relaunch.append(attempt.id)
            return
        if (
            state == AttemptState.STOPPING
            and attempt.slurm_job_id is None
            and quiet_s >= self.settings.unknown_window_s
        ):
            # asked to stop, and Slurm never had it: nothing to cancel
            attempt_event(
                session,
                attempt.id,
                AttemptState.CANCELLED if attempt.stop_reason != "preempt" else AttemptState.PREEMPTED,
                f"stop-absent:{attempt.id}",
                reason="stopped before Slurm ever had it",
                actor="reconciler",
                fencing_token=attempt.fencing_token,
            )
            result.transitions += 1
            return
        remembered = self._sighted_at.get(attempt.id)
        stored = attempt.last_seen_at or sent
        last = max(stored, remembered) if remembered is not None else stored
        if (now - last).total_seconds() >= self.settings.lost_grace_s and committed_its_output(session, attempt):
            attempt_event(
                session,
                attempt.id,
                AttemptState.SUCCEEDED,
                f"lost-committed:{attempt.id}:{attempt.version}",
                reason="Slurm lost sight of it after its output was committed",
                actor="reconciler",
                fencing_token=attempt.fencing_token,
            )
            result.transitions += 1
            return
        if (now - last).total_seconds() >= self.settings.lost_grace_s:
            attempt_event(
                session,
                attempt.id,
                AttemptState.LOST,
                f"lost:{attempt.id}:{attempt.version}",
                reason=f"Slurm has no record of job {attempt.slurm_job_id} for {self.settings.lost_grace_s:.0f}s",
                actor="reconciler",
                fencing_token=attempt.fencing_token,
                failure_category=FailureCategory.LOST,
            )
            result.lost.append(attempt.id)
            result.transitions += 1

    # --- orphans ----------------------------------------------------------------------------------

    def _cancel_orphans(self, observation: Observation, live_ids: set[str], result: ReconcileResult) -> None:
        """_cancel_orphans cancels active metasched-tagged jobs whose attempt is not live (I2)."""
        still_live = set(self._live_ids())
        for attempt_id, sightings in observation.squeue.items():
            if attempt_id in live_ids or attempt_id in still_live:
                continue
            for sighting in sightings:
                if not sighting.observed.terminal:
                    log.warning(
                        "orphan Slurm job %s (attempt %s): cancelling", sighting.slurm_job_id, attempt_id
                    )
                    self._scancel(sighting.slurm_job_id)
                    result.orphans_cancelled.append(sighting.slurm_job_id)

    def _scancel(self, slurm_job_id: str) -> None:
        try:
            self.client.cancel([slurm_job_id])
        except SlurmError as exc:
            log.warning("scancel %s failed: %s", slurm_job_id, exc)


def _is_array(session: Session, job_id: str) -> bool:
    """_is_array tells whether a job is an array (a spec the current rules refuse counts as none)."""
    try:
        return job_spec(session, job_id).array is not None
    except JOB_FAULTS:
        return False
