"""The ``metasched serve`` daemon: one replica's loop, a numbered period at a time.

This list is the cycle's one numbering: the README, ``Daemon.period`` (a ``# N. name`` comment
over each step's call) and every step module use it (``tests/test_cycle_numbering.py`` checks
them). Each step's module or package of ``meta/cycle`` is named in brackets; its docstring opens
with "Cycle step N, name". Step 9 is the pure policy, ``meta/policy``.

One period, in order:
1. lease (``lease.py``): take or renew the leader lease; its epoch fences every write. A standby
   just waits; a new leader reconciles with Slurm before it schedules anything.
2. inventory (``inventory/``): one ``sinfo --json`` (the switch tree and QOS now and then), stored
   for submit-time checks; capacity Slurm gave to jobs metasched does not own is taken out.
3. shares (``inventory/shares.py``): at the topology cadence, the tenants' weights and GPU limits
   from Slurm's accounts; accounting being down never fails the period.
4. reconcile (``reconcile/``): one ``squeue`` (``--Format`` text), ``sacct -P`` only when squeue
   misses a live attempt; move attempts by what Slurm reports, look unknown launches up and
   relaunch them only when confirmed absent, mark lost after a grace, cancel orphans.
5. adopt (``adopt/``): held plain sbatch jobs in managed partitions become metasched jobs;
   a Slurm cancel of one still waiting cancels it (step 13 releases placed ones instead of sbatch).
6. health (``health.py``): evict whole attempts from nodes drained or down past a grace.
   Then a quiet period (``snapshot/quiet.py``) — no write to what steps 7 to 9 read, the same nodes, a last
   pass that placed and preempted nothing, its time not up — skips 7 to 9, 11, 12 and 15 and reuses that pass.
7. snapshot (``snapshot/``): one consistent read of pending tasks, live attempts and tenants.
8. gates (``snapshot/gates.py``): held, dependent and not-yet-begun jobs wait before the policy,
   with their reason; jobs whose dependency can never be met and asked for it are cancelled.
9. schedule (``meta/policy/scheduler.py``): ``schedule(snapshot, config) -> Plan``, no I/O.
10. usage (``usage.py``): decay and accrue tenants' usage, in the same transaction as step 11.
11. apply (``apply/``): fenced by the epoch, capacity re-checked (I5), attempts created with
    leases and fencing tokens, victims marked for stopping, pending reasons stored, decisions logged.
12. holds (``actuate/holds.py``): Slurm reservations for held head-of-line gangs, changed only when
    the wanted set changes.
13. actuate (``actuate/``): new attempts go to the launch pool (``launch_pool.py``) in the
    policy's order, one tenant per round (``launch_order.py``); the pool
    commits ``launching``, then runs sbatch, then records the Slurm id behind the period (the
    next period takes its progress); USR1 + grace + scancel for attempts being stopped.
14. outputs (``outputs.py``): inference partitions that exited 0 are committed during step 4;
    here finished jobs get their manifest, and deadline outcomes are counted.
15. gauges (``period_metrics.py``): the leader's gauges of ``metrics.py``, every known key set.

Nothing that matters lives in memory: a kill -9 at any point loses nothing.
"""

from __future__ import annotations

import logging
import os
import socket
import threading
import time
from collections.abc import Collection
from dataclasses import dataclass, field, replace
from datetime import datetime, timedelta

from sqlalchemy import event, func, select
from sqlalchemy.orm import Session

from checkpoint.owner_workers import OutputCaps, OutputWorkers
from meta.config.period import DEFAULT_PERIOD_S
from meta.cycle.actuate.actuator import SUBMIT_PARALLEL, ActuationResult, Actuator
from meta.cycle.actuate.holds import HoldSync, desired_holds, holds_due
from meta.cycle.actuate.launch_order import by_placement, round_robin_by_tenant
from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.actuate.launch_pool import LaunchPool
from meta.cycle.adopt.adopter import Adopter
from meta.cycle.apply.decision_log import DecisionLog, DecisionLogSettings
from meta.cycle.apply.reasons import ReasonMemo, store_reasons
from meta.cycle.apply.transaction import ApplyResult, apply_plan
from meta.cycle.health import NodeWatch, evict_from_unusable_nodes
from meta.cycle.inventory.members import MemberSync
from meta.cycle.inventory.reader import InventoryReader, effective_nodes
from meta.cycle.inventory.shares import SharesSync
from meta.cycle.lease import Leadership, NotLeader, fence, release, renew, try_acquire
from meta.cycle.metrics import Metrics
from meta.cycle.outputs import Finalizing, commit_on_success, finalize_jobs
from meta.cycle.period_metrics import (
    Oldest,
    age_oldest,
    attempt_counts,
    committed_tasks,
    count_placements,
    deadline_outcomes,
    publish,
    waiting_depth,
)
from meta.cycle.reconcile import Reconciler, ReconcileSettings
from meta.cycle.reconcile.cancellers import CancellerLookup
from meta.cycle.snapshot.build import SpecCache, build_snapshot
from meta.cycle.snapshot.gates import GateResult, apply_gates, cancel_doomed, cancel_doomed_tasks
from meta.cycle.snapshot.live_view import LiveView
from meta.cycle.snapshot.pending_view import PendingView
from meta.cycle.snapshot.quiet import Inputs, QuietWatch
from meta.cycle.usage import accrue, live_rates
from meta.model.clusters import cluster_of
from meta.model.durations import utcnow
from meta.model.errors import invalid_spec_reason
from meta.model.nodes import NodeState
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState
from meta.policy.config import SchedulerConfig
from meta.policy.plan import Plan
from meta.policy.scheduler import schedule
from meta.policy.shape import ShapeMemo
from meta.policy.snapshot import PendingTask, Snapshot, tasks_named
from meta.policy.wake import next_wake
from meta.store.changes import take_changes
from meta.store.cluster_drains import drained_clusters
from meta.store.db import Database
from meta.store.lifecycle import quarantine_task
from meta.store.models import Attempt, Job, Task
from meta.store.schema_plan import head as schema_head
from meta.store.schema_plan import newer_schema
from meta.store.site import ensure_site_id
from slurm_bridge.client import SlurmClient
from slurm_bridge.clusters import site_clusters, unreachable_clusters
from slurm_bridge.errors import SlurmError
from slurm_bridge.inventory import Inventory

log = logging.getLogger("metasched.daemon")
_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]


def default_holder() -> str:
    """default_holder names this replica: host and pid."""
    return f"{socket.gethostname()}:{os.getpid()}"


@dataclass
class DaemonConfig:
    """DaemonConfig holds the daemon's periods, leases and the policy configuration."""

    period_s: float = DEFAULT_PERIOD_S
    leader_lease_s: float = 15.0
    holder: str = field(default_factory=default_holder)
    topology_refresh_s: float = 300.0
    attempt_lease_s: float = 300.0
    submit_timeout_s: float = 30.0
    submit_parallel: int = SUBMIT_PARALLEL  # the launch pool's sbatch threads
    unhealthy_grace_s: float = 60.0  # a down/unknown node evicts its work only after this long
    scheduler: SchedulerConfig = field(default_factory=SchedulerConfig)
    launch: LaunchSettings = field(default_factory=LaunchSettings)
    reconcile: ReconcileSettings = field(default_factory=ReconcileSettings)
    decisions: DecisionLogSettings = field(default_factory=DecisionLogSettings)
    # metasched-managed partitions: held plain sbatch jobs there are adopted (step 5, adopt/)
    managed_partitions: tuple[str, ...] = ()
    # what the daemon reads and writes in users' output folders, off the period, as their owner
    outputs: OutputCaps = field(default_factory=OutputCaps)
    # the site's human name, for display only (logs); the store's site id is what tags carry
    site_name: str | None = None
    # a quiet period reuses the last pass for at most this long (quiet.py; 0: every period passes in full)
    quiet_max_s: float = 30.0


@dataclass
class PeriodReport:
    """PeriodReport says what one period did (for logs, tests and benchmarks)."""

    leader: bool = False
    epoch: int = 0
    placed: int = 0
    preempting: int = 0
    launched: int = 0  # launches the pool finished since the last period (and relaunches)
    queued: int = 0  # attempts handed to the launch pool in this period
    reconcile_transitions: int = 0
    slurm_reads: int = 0
    rested: bool = False  # steps 7 to 11 reused the last pass: nothing they read changed (quiet.py)
    error: str = ""


@dataclass
class _Cycle:
    """_Cycle is what steps 7 to 15 of one period hand on: the snapshot, the gates, the plan and what applied."""

    inventory: Inventory
    started_at: datetime  # the cycle's "now": snapshot, gates, usage, apply and holds all use it
    t0: float  # perf_counter at step 7: the cycle's duration runs to the plan (step 9)
    snapshot: Snapshot | None = None
    nodes: tuple[NodeState, ...] = ()  # the inventory minus foreign work
    gated: GateResult | None = None
    job_of_task: dict[str, str] = field(default_factory=dict)
    plan: Plan | None = None
    duration_s: float = 0.0
    skipped: set[str] = field(default_factory=set)
    placed: dict[str, PendingTask] = field(default_factory=dict)  # the waiting tasks whose placements committed
    drained: frozenset[str] = frozenset()  # the clusters an admin drained (metasched cluster drain)


def without_dark_clusters(nodes: tuple[NodeState, ...], dark: Collection[str]) -> tuple[NodeState, ...]:
    """without_dark_clusters drains, for the policy only, the nodes of clusters that did not answer.

    Their work is still held there (its reservations stay) and step 6 does not evict it: the
    nodes are last seen healthy, and a cluster that is only cut off from metasched runs on.
    """
    if not dark:
        return nodes
    return tuple(replace(node, drained=True) if cluster_of(node.name) in dark else node for node in nodes)


def limit_idle_transactions(db: Database, seconds: float) -> None:
    """limit_idle_transactions makes PostgreSQL end this replica's transactions left idle for ``seconds``.

    Every fenced write locks the lease row until its transaction ends. A replica frozen inside
    such a transaction (SIGSTOP, a VM pause, a long GC) would hold that lock for as long as it
    is frozen, and the standby's ``try_acquire`` would wait on it instead of taking over when
    the lease runs out. With ``idle_in_transaction_session_timeout`` at the lease length the
    server rolls the frozen transaction back and frees the lock; the thawed replica gets a
    connection error, its period ends, and the fence stops it from then on.
    """
    engine = db.engine
    if engine.dialect.name != "postgresql":
        return
    millis = max(1000, int(seconds * 1000))

    @event.listens_for(engine, "connect")
    def _set_timeout(dbapi_connection, _record) -> None:  # noqa: ANN001 - DBAPI objects
        cursor = dbapi_connection.cursor()
        cursor.execute(f"SET idle_in_transaction_session_timeout = {millis}")
        cursor.close()
        dbapi_connection.commit()

    engine.dispose()  # pooled connections opened before this have no timeout: open new ones


class Daemon:
    """Daemon runs the scheduling loop for one replica."""

    def __init__(
        self, db: Database, client: SlurmClient, config: DaemonConfig, metrics: Metrics | None = None
    ):
        self.db = db
        self.client = client
        self.config = config
        self.metrics = metrics or Metrics()
        self.specs = SpecCache()
        self.node_watch = NodeWatch(config.unhealthy_grace_s)
        self.inventory = InventoryReader(db, client, config.topology_refresh_s)
        self.shares = SharesSync(db, client, config.topology_refresh_s)  # step 3, at the topology cadence
        self.members = MemberSync(db, client, config.topology_refresh_s)  # step 3b: clusters: auto
        limit_idle_transactions(db, config.leader_lease_s)
        # an sbatch still in flight can land until its own deadline: a launch is only "absent"
        # once the look-up window has outlasted the submit timeout (the runner caps its lifetime)
        self.outputs = OutputWorkers(config.outputs)  # users' folders are read here, never in the period
        # read once: every job this daemon launches, follows or cancels is tagged with it
        self.site = config.launch.site or ensure_site_id(db)
        reconcile = replace(
            config.reconcile,
            unknown_window_s=config.reconcile.unknown_window_s + config.submit_timeout_s,
            daemon_uid=config.launch.daemon_uid,  # a tagged job is ours when it runs as launch ran it
        )
        self.reconciler = Reconciler(
            db,
            client,
            reconcile,
            on_success=lambda session, a: commit_on_success(session, a, self.specs, self.outputs),
            cancellers=CancellerLookup(client),  # a user's plain scancel cancels the job
            in_flight=lambda: self.launches.in_flight(),  # this replica's own launches under way
            site=self.site,
        )
        self._finalized = Finalizing()
        self._placed: list[str] = []  # this period's new attempts in the policy's order (launched in it)
        self._finalize_since: datetime | None = None  # None: look at every inference job (a new leader)
        self.holds = HoldSync(client)
        self.adopter = Adopter(db, client, config.managed_partitions, site=self.site)
        self.actuator = Actuator(
            db,
            client,
            self.specs,
            replace(config.launch, site=self.site),
            submit_timeout_s=config.submit_timeout_s,
            submit_parallel=config.submit_parallel,
        )
        # launches stream behind the period; before each sbatch the pool checks that the epoch it
        # marked the batch under is still this replica's, renewing the lease when it is due
        self.actuator.keep_lease = self._keep_lease
        self.launches = LaunchPool(self.actuator, config.submit_parallel)
        self._lease_lock = threading.Lock()  # the period and the pool both renew the lease
        self._renewed_at = 0.0
        self.leadership: Leadership | None = None
        self._behind_until = 0.0  # a standby of a version older than the store's schema looks again then
        self.reasons = ReasonMemo()  # what this leader stored as each waiting task's reason
        self._reasons_of: tuple[int, dict[str, str]] = (0, {})  # the last pass's cycle id and each task's job
        self.shapes = ShapeMemo()  # each waiting task's shape, kept while the view keeps the task object
        self.pending_view = PendingView()  # each waiting task described once, again only when it changes
        self.live_view = LiveView()  # each live attempt's reservation, likewise
        self.decision_log = DecisionLog(config.decisions)  # what each cycle decided and why, bounded
        self._started_at = utcnow()  # deadline outcomes count jobs that ended since this replica started
        self.quiet = QuietWatch(config.quiet_max_s)  # when a period may reuse the last pass
        self._inputs: Inputs | None = None  # what this period's steps 7 to 9 read besides the store
        self._rates: dict[str, float] = {}  # the live attempts' usage rates at the last full pass
        self._oldest: Oldest | None = None  # the earliest waits at the last full pass: resting ages them

    # --- the loop ------------------------------------------------------------------------------

    def run(self, stop: threading.Event, exit_when_idle: bool = False) -> None:
        """run repeats periods until ``stop`` is set (or, if asked, no work is left), then releases leadership."""
        idle_periods = 0
        while not stop.is_set():
            started = time.monotonic()
            report = self.period()
            if report.error:
                log.warning("period error: %s", report.error)
            idle_periods = idle_periods + 1 if exit_when_idle and not report.error and self.idle() else 0
            if idle_periods >= 2:  # twice in a row: nothing was in flight between the two reads
                log.info("no pending or live work left: exiting")
                break
            stop.wait(max(0.0, self.config.period_s - (time.monotonic() - started)))
        self.close_launches()  # no sbatch may go out once the lease is released
        self.outputs.close()
        if self.leadership is not None:
            try:
                release(self.db, self.leadership)
            except Exception as exc:  # noqa: BLE001 - shutdown must finish even if the DB is gone
                log.warning("could not release leadership: %s", exc)

    def close_launches(self, timeout_s: float | None = None) -> None:
        """close_launches stops the launch pool: queued launches are dropped, running sbatch calls finish."""
        self.launches.close(self.config.submit_timeout_s + 5.0 if timeout_s is None else timeout_s)

    def settle_launches(self, timeout_s: float) -> bool:
        """settle_launches waits until the launch pool and the output workers are idle (``--once``, tests)."""
        return self.launches.wait_idle(timeout_s) and self.outputs.wait_idle(timeout_s)

    def idle(self) -> bool:
        """idle tells whether no task waits and no attempt is live."""
        with self.db.session() as session:
            busy = session.scalar(
                select(func.count()).select_from(Task).where(Task.state.in_(["pending", "scheduled", "running"]))
            )
        return not busy

    def period(self) -> PeriodReport:
        """period runs one leader-fenced round, the numbered steps in order; errors end the round, never the daemon."""
        report = PeriodReport()
        try:
            # 1. lease
            if not self._lease(report):
                return report
            # 2. inventory
            inventory = self._inventory(report)
            # 3. shares
            self._shares()
            # 4. reconcile
            changed = self._changes()  # writes since the last period: a calm reconcile needs none
            self._reconcile(report, changed)
            # 5. adopt
            self._adopt()
            # 6. health
            self._health(inventory, report)
            # 7 to 11 and 15 rest when nothing they read changed since a pass that acted on nothing
            if self._quiet(inventory, changed):
                self._rest(report)
                return report
            # 7. snapshot
            cycle = self._snapshot(inventory)
            # 8. gates
            self._gates(cycle)
            # 9. schedule
            self._schedule(cycle)
            self._rates = live_rates(cycle.snapshot.reservations, self.config.scheduler)  # type: ignore[union-attr]
            with self.db.session() as session:  # steps 10 and 11 commit in one transaction
                # 10. usage
                accrue(session, self.config.scheduler, cycle.started_at, self._rates)
                # 11. apply
                result = self._apply(session, cycle)
            self._applied(cycle, result, report)  # step 11, once committed
            # 12. holds
            self._holds(cycle)
            # 13. actuate
            self._actuate(report)
            # 14. outputs
            self._outputs()
            # 15. gauges
            self._gauges(cycle)
            self._passed(cycle)
        except NotLeader as exc:
            self.reasons.forget()
            self.forget_rest()
            log.warning("lost leadership: %s", exc)
            self.launches.abandon()
            self.leadership = None
            self.metrics.set_leading(None)
            report.error = str(exc)
        except SlurmError as exc:
            # Slurm unreachable or slow: an unknown, not a failure; try again next period
            report.error = f"slurm: {exc}"
            self.forget_rest()
        except Exception as exc:  # noqa: BLE001 - e.g. PostgreSQL restarting: wait and retry
            self.reasons.forget()  # a failed commit may have dropped what the memo believes stored
            self.forget_rest()
            log.exception("period failed")
            report.error = f"{type(exc).__name__}: {exc}"
        return report

    # --- steps ---------------------------------------------------------------------------------

    def _lease(self, report: PeriodReport) -> bool:
        """_lease runs step 1: take or renew the lease, take the launch pool's progress; False on a standby."""
        self._lead(report)
        self.reasons.follow(self.leadership.epoch if self.leadership else None)
        if self.leadership is not None and not self.reasons.holds(self.leadership.epoch):
            with self.db.session() as session:  # what the store holds needs no rewrite
                self.reasons.load(session, self.leadership.epoch)
        self._launch_progress(report)
        if self.leadership is None:
            self.launches.abandon()
            return False
        return True

    def _lead(self, report: PeriodReport) -> None:
        renewing = time.monotonic()
        if self.leadership is None and renewing < self._behind_until:
            return  # a standby older than the store's schema: the lead is for newer replicas
        leadership = try_acquire(self.db, self.config.holder, self.config.leader_lease_s)
        if leadership is not None and self.leadership is None and not self._schema_known(leadership):
            leadership = None
        if leadership is None or self.leadership is None or leadership.epoch != self.leadership.epoch:
            self.forget_rest()  # another leader may have taken the store's changes meanwhile
        with self._lease_lock:
            self.leadership = leadership
            self._renewed_at = renewing
        self.metrics.set_leading(leadership.epoch if leadership else None)
        if leadership:
            report.leader, report.epoch = True, leadership.epoch

    def _schema_known(self, taken: Leadership) -> bool:
        """_schema_known: a replica that just took the lead gives it back when the store's schema is newer than it knows.

        A newer metasched migrated the store (docs/upgrades.md): its replicas may already have led and
        written what this version misreads (e.g. job tags it does not parse, so it would launch their
        attempts again), so in a rolling upgrade the lead only moves forward. Checked only on taking
        the lead, never while leading: a leader keeps its lease through an online-safe migration.
        """
        newer = newer_schema(self.db.engine)
        if newer is None:
            return True
        release(self.db, taken)
        self._behind_until = time.monotonic() + max(30.0, 5 * self.config.period_s)
        log.warning("the store is at schema %s, newer than this version knows (its newest is %s): a newer "
                    "metasched migrated it; not leading (the lead moves forward only), standing by — run the "
                    "newer version", newer, schema_head())  # fmt: skip
        return False

    def _keep_lease(self, leadership: Leadership | None = None) -> None:
        """_keep_lease renews the lease once a third of it has passed (NotLeader if it lapsed or changed).

        Without it a period longer than the lease (a slow step, launches of a pool stuck on slow
        sbatch calls) lets the lease expire while this replica still acts: the fence then stops it
        half-way and a standby or this replica takes a new epoch — leadership churns though
        nothing failed. ``leadership`` is the epoch a launch batch was marked under: once this
        replica no longer holds it, the pool must send nothing more.
        """
        with self._lease_lock:
            current = self.leadership
            if leadership is not None and current != leadership:
                raise NotLeader(f"epoch {leadership.epoch} is no longer this replica's")
            if current is None or time.monotonic() - self._renewed_at < self.config.leader_lease_s / 3:
                return
            renewing = time.monotonic()
            if not renew(self.db, current, self.config.leader_lease_s):
                raise NotLeader(f"lease of epoch {current.epoch} lapsed during the period")
            self._renewed_at = renewing

    def _launch_progress(self, report: PeriodReport) -> None:
        """_launch_progress takes what the launch pool finished since the last period into the report."""
        progress = self.launches.progress()
        report.launched += len(progress.launched)

    def _inventory(self, report: PeriodReport) -> Inventory:
        """_inventory runs step 2: sinfo (topology and QOS when due), stored; each cluster's reachability gauged."""
        inventory = self.inventory.read()
        report.slurm_reads += 1
        self.metrics.clusters_seen(site_clusters(self.client), unreachable_clusters(self.client))
        return inventory

    def _shares(self) -> None:
        """_shares runs step 3 at the topology cadence, on its own clock (a cluster without a switch tree re-reads topology each period)."""
        self.shares.sync_if_due(time.monotonic())
        self.members.sync_if_due(time.monotonic())

    def _reconcile(self, report: PeriodReport, changed: int) -> None:
        """_reconcile runs step 4, every period: a new leader never schedules on a stale picture.

        If Slurm cannot be read the period ends here (SlurmError) without scheduling. With no
        store write since the last period (``changed`` 0) a calm pass may be skipped
        (``reconcile/calm.py``); a new leader's first period always reads in full.
        """
        assert self.leadership is not None
        result = self.reconciler.run(self.leadership, store_changed=bool(changed))
        report.slurm_reads += result.slurm_reads
        report.reconcile_transitions = result.transitions
        self.metrics.reconcile_transitions.inc(result.transitions)
        self.metrics.orphans.inc(len(result.orphans_cancelled))
        # confirmed absent: the same attempt goes out again, through the pool like any launch
        report.queued += self.launches.enqueue(result.relaunch, self.leadership, AttemptState.LAUNCH_UNKNOWN)
        self.metrics.reconciled()

    def _adopt(self) -> None:
        """_adopt runs step 5; Slurm failing there only postpones adoption, never the period."""
        assert self.leadership is not None
        try:
            self.adopter.run(self.leadership)
        except SlurmError as exc:
            log.warning("adoption skipped this period: %s", exc)

    def _health(self, inventory: Inventory, report: PeriodReport) -> None:
        """_health runs step 6: whole attempts on nodes drained or down past the grace are evicted."""
        assert self.leadership is not None
        with self.db.session() as session:
            bad = self.node_watch.confirmed(inventory.nodes, time.monotonic())
            evicted = evict_from_unusable_nodes(session, self.leadership, inventory.nodes, bad)
        report.preempting += len(evicted)

    def forget_rest(self) -> None:
        """forget_rest makes the next period read and pass in full (a failure, a change of leader)."""
        self.quiet.forget()
        self.reconciler.calm.forget()

    def _changes(self) -> int:
        """_changes takes the store writes logged since the last look (``meta/store/changes.py``), fenced."""
        assert self.leadership is not None
        with self.db.session() as session:
            fence(session, self.leadership)  # a deposed leader must not take changes its successor has to see
            return take_changes(session)

    def _quiet(self, inventory: Inventory, changed: int) -> bool:
        """_quiet tells whether steps 7 to 11 may rest: no store write since the last pass, the same nodes, time not up (snapshot/quiet.py)."""
        assert self.leadership is not None
        inputs = Inputs(self.leadership.epoch, inventory, frozenset(unreachable_clusters(self.client)))
        changed += self._changes()  # and steps 4 to 6's own writes, or any committed meanwhile
        rest = self.quiet.may_rest(inputs, changed, utcnow().timestamp())
        self._inputs = inputs
        if not rest:
            self.quiet.forget()  # until this pass commits, a failure half-way leaves the next one full
        return rest

    def _rest(self, report: PeriodReport) -> None:
        """_rest runs a quiet period's remaining steps: usage accrues at the last pass's rates, launches and outputs go on."""
        self._placed = []
        report.rested = True
        now = utcnow()
        with self.db.session() as session:
            accrue(session, self.config.scheduler, now, self._rates)  # 10. usage
        self._late_reasons(now)  # 11: the last pass's reasons left for later
        self._actuate(report)  # 13
        self._outputs()  # 14
        if self._oldest is not None:
            age_oldest(self.metrics, self._oldest, now.timestamp())  # 15: waits grow; the other gauges hold

    def _late_reasons(self, now: datetime) -> None:
        """_late_reasons writes the next share of the reasons the last pass left unwritten (reasons.py)."""
        late = self.reasons.late()
        if not late or self.leadership is None:
            return
        cycle_id, job_of_task = self._reasons_of
        with self.db.session() as session:
            fence(session, self.leadership)
            store_reasons(session, late, cycle_id, job_of_task, now)
        self.reasons.written(late)

    def _passed(self, cycle: _Cycle) -> None:
        """_passed tells the quiet watch a full pass committed, and when time alone changes its plan."""
        assert cycle.snapshot is not None and cycle.plan is not None and cycle.gated is not None
        now = cycle.started_at.timestamp()
        moments = (next_wake(cycle.snapshot.pending, now, self.config.scheduler), cycle.gated.wake_at,
                   holds_due(cycle.plan.held))  # fmt: skip
        wake = min((at for at in moments if at is not None), default=None)
        self.quiet.passed(self._inputs, cycle.plan, now, wake)

    def _snapshot(self, inventory: Inventory) -> _Cycle:
        """_snapshot runs step 7: the policy's snapshot on the nodes minus foreign work; poison tasks quarantined."""
        self._placed = []
        cycle = _Cycle(inventory=inventory, started_at=utcnow(), t0=time.perf_counter())
        poison: list[tuple[str, Exception]] = []
        with self.db.session() as session:
            snapshot = build_snapshot(
                session,
                (),  # the nodes follow from the live attempts it reads: what metasched holds is not foreign
                self.specs,
                switch_parent=inventory.switch_parent,
                inventory_version=inventory.version,
                now=cycle.started_at,
                quarantine=poison,
                view=self.pending_view,
                live=self.live_view,
            )
            # an admin's drain (metasched cluster drain) is a dark cluster's treatment: no new work, none evicted
            drained = cycle.drained = drained_clusters(session)
        cycle.nodes = without_dark_clusters(tuple(effective_nodes(inventory, self.live_view.held_per_node())),
                                            drained | set(unreachable_clusters(self.client)))  # fmt: skip
        cycle.snapshot = replace(snapshot, nodes=cycle.nodes)
        self.specs.keep_only(snapshot.pending, snapshot.reservations)  # memory follows the queue, not history
        if poison:
            self._quarantine(poison)
        return cycle

    def _quarantine(self, poison: list[tuple[str, Exception]]) -> None:
        """_quarantine fails the pending tasks whose own data broke the snapshot (fenced, audited)."""
        assert self.leadership is not None
        with self.db.session() as session:
            fence(session, self.leadership)
            for task_id, problem in poison:
                if quarantine_task(session, task_id, problem, actor="scheduler"):
                    log.warning("task %s quarantined: %s", task_id, invalid_spec_reason(problem))

    def _gates(self, cycle: _Cycle) -> None:
        """_gates runs step 8: held, dependent and not-yet-begun jobs wait before the policy, with their reason."""
        assert self.leadership is not None and cycle.snapshot is not None
        with self.db.session() as session:
            gated = apply_gates(session, cycle.snapshot.pending, self.specs, cycle.started_at,
                                self.config.scheduler.kill_invalid_depend)  # fmt: skip
        cycle.gated = gated
        cycle.job_of_task = {t.task_id: t.job_id for t in cycle.snapshot.pending} | gated.job_of_task
        cycle.snapshot = replace(cycle.snapshot, pending=tuple(gated.open))
        if gated.doomed or gated.doomed_tasks:
            with self.db.session() as session:
                fence(session, self.leadership)
                cancel_doomed(session, gated.doomed)
                cancel_doomed_tasks(session, gated.doomed_tasks)

    def _schedule(self, cycle: _Cycle) -> None:
        """_schedule runs step 9, the pure policy; the gated tasks' reasons join its plan."""
        assert cycle.snapshot is not None and cycle.gated is not None
        plan = schedule(cycle.snapshot, self.config.scheduler, record=self.decision_log.record, shapes=self.shapes)
        plan.reasons.update(cycle.gated.reasons)
        plan.inventory_version = cycle.inventory.version
        cycle.plan = plan
        cycle.duration_s = time.perf_counter() - cycle.t0

    def _apply(self, session: Session, cycle: _Cycle) -> ApplyResult:
        """_apply runs step 11 in the usage step's transaction: the plan committed, its decisions logged."""
        assert self.leadership is not None and cycle.snapshot is not None and cycle.plan is not None
        result = apply_plan(
            session,
            cycle.plan,
            self.leadership,
            cycle.nodes,
            cycle_started=cycle.started_at,
            duration_s=cycle.duration_s,
            pending_count=len(cycle.snapshot.pending),
            lease_s=self.config.attempt_lease_s,
            job_of_task=cycle.job_of_task,
            memo=self.reasons,
        )
        self.decision_log.write(session, cycle.plan, cycle=result.cycle_id, at=cycle.started_at,
                                epoch=self.leadership.epoch, skipped=result.skipped,
                                preempting=result.preempting)  # fmt: skip
        self.decision_log.prune(session, cycle.started_at, time.monotonic())
        return result

    def _applied(self, cycle: _Cycle, result: ApplyResult, report: PeriodReport) -> None:
        """_applied ends step 11 once its transaction committed: the reason memo trusts it, the counts take it."""
        assert self.leadership is not None and cycle.snapshot is not None and cycle.plan is not None
        self.reasons.committed(cycle.plan.reasons, self.leadership.epoch, result.reasons_deferred)
        self._reasons_of = (result.cycle_id, cycle.job_of_task)  # where a quiet period's late reasons belong
        self.metrics.cycle_seconds.observe(cycle.duration_s)
        cycle.skipped = set(result.skipped)
        cycle.placed = committed_tasks(cycle.snapshot, cycle.plan, cycle.skipped)
        count_placements(self.metrics, cycle.snapshot, cycle.plan, cycle.placed, set(result.preempting))
        report.placed = len(result.created)
        self._placed = list(result.created)
        report.preempting += len(result.preempting)

    def _holds(self, cycle: _Cycle) -> None:
        """_holds runs step 12: Slurm reservations for the plan's held gangs, touched only when they change."""
        assert cycle.snapshot is not None and cycle.plan is not None
        held = tasks_named(cycle.snapshot.pending, {h.task_id for h in cycle.plan.held})
        runtime = {task_id: task.runtime_estimate_s for task_id, task in held.items()}
        self.holds.sync(desired_holds(cycle.plan.held, runtime, cycle.started_at), cycle.started_at)

    def _actuate(self, report: PeriodReport) -> None:
        """_actuate runs step 13: adopted jobs released, new attempts queued on the launch pool, stops sent."""
        assert self.leadership is not None
        self.adopter.release_created(self.leadership)  # adopted jobs are released, never sbatch'ed
        with self.db.session() as session:
            rows = session.execute(select(Attempt.id, Job.tenant).join(Job, Job.id == Attempt.job_id)
                                   .where(Attempt.state == AttemptState.CREATED.value)).all()  # fmt: skip
        tenant_of = dict(rows)
        ordered = by_placement(tenant_of, self._placed)
        created = round_robin_by_tenant([(attempt_id, tenant_of[attempt_id]) for attempt_id in ordered])
        report.queued += self.launches.enqueue(created, self.leadership, AttemptState.CREATED)
        self.actuator.stop_requested(self.leadership, ActuationResult())

    def _outputs(self) -> None:
        """_outputs runs step 14: finished jobs get their manifest; their deadline outcomes are counted."""
        with self.db.session() as session:
            looked = utcnow()
            finished = finalize_jobs(session, self.specs, self._finalized, self.outputs, self._finalize_since)
            outcomes = deadline_outcomes(session, self.specs, finished, self._started_at)
        # next time, jobs with a success since this look (a minute's margin for late commits)
        self._finalize_since = looked - timedelta(seconds=60)
        for (tenant, outcome), count in outcomes.items():
            self.metrics.deadlines.labels(tenant, outcome).inc(count)

    def _gauges(self, cycle: _Cycle) -> None:
        """_gauges runs step 15: the leader's gauges, every known tenant, state, reason and GPU type, 0 when empty."""
        assert cycle.snapshot is not None and cycle.plan is not None
        with self.db.session() as session:
            attempts = attempt_counts(session)
        depth = waiting_depth(self.pending_view.queue.depth(), cycle.placed)
        self._oldest = publish(
            self.metrics, cycle.snapshot, cycle.plan, self.config.scheduler, skipped=cycle.skipped, placed=cycle.placed,
            depth=depth, attempts=attempts, clusters=site_clusters(self.client), drained=cycle.drained,
        )
