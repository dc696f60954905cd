"""For step 4 (reconcile), the Reconciler: one observation of Slurm applied to every live attempt, chunk by chunk."""

from __future__ import annotations

import logging
from collections.abc import Callable, Collection
from datetime import datetime, timedelta

from sqlalchemy import select
from sqlalchemy.orm import Session

from meta.cycle.lease import Leadership, fence
from meta.cycle.reconcile.attribution import CancelAttribution
from meta.cycle.reconcile.batches import Batch, batches
from meta.cycle.reconcile.calm import CalmMemo
from meta.cycle.reconcile.cancellers import Canceller
from meta.cycle.reconcile.dark import on_dark_cluster, replay_if_dark_too_long
from meta.cycle.reconcile.listed import ListedRows
from meta.cycle.reconcile.not_ours import NotOurs
from meta.cycle.reconcile.observe import Observation, observe
from meta.cycle.reconcile.orphans import cancel_orphans, scancel
from meta.cycle.reconcile.ownership import ClaimCache, Claims
from meta.cycle.reconcile.seen import choose, seen
from meta.cycle.reconcile.settings import LIVE, ReconcileResult, ReconcileSettings, SuccessHook
from meta.cycle.reconcile.sightings import Sightings
from meta.cycle.reconcile.spoofed import SpoofReports
from meta.cycle.reconcile.steady import classify, live_rows, move_together
from meta.cycle.reconcile.unseen import unseen
from meta.model.durations import utcnow
from meta.model.errors import JOB_FAULTS, ConcurrentModification, StaleFencingToken, invalid_spec_reason
from meta.model.states import IllegalTransition
from meta.store.db import Database
from meta.store.lifecycle import quarantine_attempt
from meta.store.models import Attempt
from meta.store.site import ensure_site_id
from slurm_bridge.client import SlurmClient
from slurm_bridge.clusters import unreachable_clusters

log = logging.getLogger("metasched.reconciler")
_CHUNK = 1000  # attempts per reconcile transaction (followed alone, each costs a row read)


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
        site: str | None = None,
    ):
        self.db = db
        self.client = client
        self.settings = settings or ReconcileSettings()
        # only jobs tagged with this site (or, older than sites, naming a stored attempt) are ours
        self.site = site or ensure_site_id(db)
        self.not_ours = NotOurs()
        self.attribution = CancelAttribution(cancellers, self.settings.cancel_attribution_s)
        self.sightings = Sightings(self.settings)
        self.spoofs = SpoofReports()
        self.claims = ClaimCache()
        self.rows = ListedRows()  # the last squeue's rows, parsed: a row listed again unchanged is not parsed again
        self.calm = CalmMemo(self.sightings)  # the last pass that moved nothing, while it stands
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
                .where(Attempt.state.in_(LIVE))
                .order_by(Attempt.created_at)
                .limit(1)
            )
        start = (oldest - timedelta(minutes=5)) if oldest else utcnow() - timedelta(minutes=10)
        return max(start, floor)

    def run(self, leadership: Leadership, store_changed: bool = True) -> ReconcileResult:
        """run observes Slurm once and applies what it saw; a failed read changes nothing.

        ``store_changed`` False: the caller saw no write to the store since the last pass
        (``meta/store/changes.py``), so a calm period may skip the pass (calm.py).
        """
        # read before Slurm is: a launch that ends after this read is recorded before it leaves the set
        self._sending = self.in_flight()
        try:
            calm = None if store_changed or self._sending else self.calm.current(utcnow())
            listed = None
            if calm is not None:
                # nothing launched and nothing written since the last pass: its live attempts and
                # their claims still hold, so reading them after squeue misses nothing
                listed = self.client.squeue()
                if calm.shows(listed, unreachable_clusters(self.client)):
                    return self.calm.rest(calm, utcnow())
            live = self._claims()
            # an attempt still being sent is never judged absent, so accounting is not read for it
            expected = [attempt_id for attempt_id in live.claims if attempt_id not in self._sending]
            observation = observe(self.client, self.since, expected, live, site=self.site, listed=listed,
                                  rows=self.rows)  # fmt: skip
            return self.apply(observation, leadership)
        except BaseException:
            self.calm.forget()
            raise
        finally:
            self._sending = frozenset()

    def apply(self, observation: Observation, leadership: Leadership) -> ReconcileResult:
        """apply follows every live attempt and cancels orphans, from one observation.

        Only what Slurm changed is written (batches.py): clean moves in bulk, the rest one by one
        in a savepoint each, steady attempts only when their stored sighting is due — one fenced
        transaction per batch of at most a chunk of attempts, none when nothing moved. One
        attempt that lost a race (a user cancel at the same moment) is simply looked at again
        next period.
        """
        result = ReconcileResult(slurm_reads=observation.calls)
        with self.db.session() as session:  # read again: the observation may be older than this call
            rows = live_rows(session)
        live_ids = [row.id for row in rows]
        self._screen(observation, result)
        steady, groups = classify(rows, observation)
        grouped = {attempt_id for stimuli in groups.values() for attempt_id in stimuli}
        calm = set(steady) | grouped
        alone = [row.id for row in rows if row.id not in calm]
        due = self.sightings.due(steady, observation.at)
        for batch in batches(groups, alone, due, _CHUNK):
            with self.db.session() as session:
                fence(session, leadership)
                self._work(session, batch, observation, result)
        self.sightings.keep(live_ids)
        self.claims.keep(set(live_ids) | _named(observation))
        cancel_orphans(observation, set(live_ids), lambda: set(self._live_ids()), result, self._scancel)
        self.calm.remember(result, observation, live_ids, wrote=bool(groups or alone or due))
        return result

    def _work(self, session: Session, batch: Batch, observation: Observation, result: ReconcileResult) -> None:
        """_work does one batch in its transaction: bulk moves, the one-by-one path (and failed groups), due sightings."""
        done: set[str] = set()
        reading: set[str] = set()  # succeeded, output still being read: only their sighting is new
        members = [attempt_id for stimuli in batch.groups.values() for attempt_id in stimuli]
        for key, stimuli in batch.groups.items():
            # a refused output leaves ``stimuli`` (move_together): it takes the one-by-one path below
            if move_together(session, key, stimuli, observation.at, result, self.sightings, self.on_success,
                             reading):  # fmt: skip
                done.update(stimuli)
        done.update(reading)
        for attempt_id in [a for a in members if a not in done] + batch.alone:
            if self._can_judge(attempt_id, observation):
                self._follow(session, attempt_id, observation, result)
        self.sightings.renew(session, batch.renew + sorted(reading), observation.at)

    def _claims(self, attempt_ids: Collection[str] | None = None) -> Claims:
        """_claims are the recorded ids and run-as users of ``attempt_ids`` (None: the live attempts)."""
        ids = self._live_ids() if attempt_ids is None else attempt_ids
        with self.db.session() as session:
            return Claims.load(session, ids, self.settings.daemon_uid, self.claims)

    def _screen(self, observation: Observation, result: ReconcileResult) -> None:
        """_screen sets aside the tagged jobs that are not their attempt's, and reports new ones once."""
        named = _named(observation)
        if named:
            claims = self._claims(named)  # one batched read: which attempts this store has, and whose they are
            observation.screen(claims)
            result.spoofed.extend(self.spoofs.report(self.db, observation, claims))
        result.foreign = observation.foreign
        result.legacy_ignored.extend(self.not_ours.report(observation))

    def _live_ids(self) -> list[str]:
        """_live_ids are the attempts whose Slurm job metasched follows, read now."""
        with self.db.session() as session:
            return list(session.scalars(select(Attempt.id).where(Attempt.state.in_(LIVE))))

    @staticmethod
    def _can_judge(attempt_id: str, observation: Observation) -> bool:
        """_can_judge: an attempt squeue missed is only judged once accounting was read too.

        It went live after the reads were planned (another replica's launch, a relaunch): the
        next period reads sacct for it rather than concluding "absent" from squeue alone. An
        attempt on a dark cluster is looked at (only to replay it past the dark grace).
        """
        return observation.accounting_read or attempt_id in observation.squeue or attempt_id in observation.on_dark

    def _follow(self, session: Session, attempt_id: str, observation: Observation, result: ReconcileResult) -> None:
        """_follow moves one attempt by what Slurm shows of it, in its own savepoint."""
        try:
            with session.begin_nested():
                attempt = session.get(Attempt, attempt_id, populate_existing=True)
                if attempt is None or attempt.state not in LIVE:
                    return
                if on_dark_cluster(attempt, observation.dark):
                    # unknown, never lost, until its cluster answers: only a replayable one moves on
                    replay_if_dark_too_long(session, attempt, observation.dark, self.settings, result)
                    return
                sightings = observation.sightings(attempt_id)
                if sightings:
                    chosen = choose(attempt, sightings, result, self._scancel)
                    seen(session, attempt, chosen, observation, result, sightings=self.sightings,
                         attribution=self.attribution, on_success=self.on_success)  # fmt: skip
                else:
                    unseen(session, attempt, observation.at, result, settings=self.settings,
                           sending=self._sending, sightings=self.sightings)  # fmt: skip
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

    def _scancel(self, slurm_job_id: str) -> None:
        """_scancel cancels one Slurm job (a duplicate or an orphan); a failure is only logged."""
        scancel(self.client, slurm_job_id)


def _named(observation: Observation) -> set[str]:
    """_named are the attempts the observation's tagged jobs name."""
    return set(observation.squeue) | set(observation.sacct) | {key[0] for key in observation.spoofed}
