"""The discrete-event engine: arrivals, completions, checkpoints and preemptions drive the policy.

Every time something changes (a batch of arrivals or completions at one instant, or on the
``cycle_interval_s`` grid), the engine builds a Snapshot and calls the policy — the same
``schedule(snapshot, config)`` the daemon calls — then applies the Plan: preemptions first
(the victim loses the work since its last checkpoint and goes back to pending), then
placements (which occupy capacity and must fit). Held reservations are recorded only: the
policy sees the same running work next cycle and recomputes them, as in the daemon.

A placement decided at ``t`` holds its capacity (and is charged fair-share usage) from ``t``; with
``SimConfig.launch_delay_s`` = d it starts running at ``t + d`` (the launch through Slurm), so its
queue delay ends there and its completion, checkpoints and restore come d later. Its reservation
shows the policy the attempt as running from ``t + d``. Preempted before ``t + d``, it had not run:
it loses nothing, releases its capacity at once (no grace) and waits again as if never started.
The waiting ledger judges waiting up to each decision: the launch after it is no waiting cause.

Several Slurm clusters (issue 26; node names ``cluster/node``): a job is rejected at submit only when
no single cluster it may use could host it (a gang never spans two), an optional *router* confines
each task to clusters when it is submitted (``PendingTask.clusters``, never changed afterwards), a
placement that spans clusters or leaves its task's clusters is invalid, and ``SimConfig.outages``
show a dark cluster's nodes as down and its attempts as not preemptible (``meta.sim.outages``); the
end of an outage wakes the policy. With one cluster and none of these the engine runs as before.
"""

from __future__ import annotations

import dataclasses
import heapq
import math
import time
from collections.abc import Callable
from dataclasses import dataclass, field
from typing import Any

from meta.model.clusters import cluster_of
from meta.model.kinds import Topology
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.policy.fifo import never_fits
from meta.policy.plan import Placement, Plan, Preemption, carried
from meta.policy.snapshot import PendingTask, PriorHold, Reservation, Snapshot
from meta.sim.admission import SimGate
from meta.sim.cluster import ClusterSpec, gang_shape
from meta.sim.config import SimConfig, runtime_estimate
from meta.sim.job import JobState, SimJob
from meta.sim.outages import dark_clusters
from meta.sim.trace import TraceJob
from meta.sim.usage_ledger import UsageLedger, guarantees_from_weights, usage_config
from meta.sim.waiting_causes import WaitingSplit
from meta.sim.waiting_ledger import WaitingLedger

WARMUP_TOO_LONG = "warm-up longer than the trace: every job is measured"
COMPLETE, STOP, CHECKPOINT = 0, 1, 2  # capacity comes back before checkpoints at one instant
# confines a task to Slurm clusters when it is submitted (empty: any), seeing the site as the policy would
Router = Callable[[PendingTask, Snapshot], frozenset[str]]


class SimulationError(RuntimeError):
    """SimulationError is raised when a policy returns a plan that cannot be applied."""


@dataclass(slots=True)
class CycleSample:
    """CycleSample is what one policy call reported: time, stranded and free GPUs, holds."""

    time: float
    stranded_gpus: int
    free_gpus: int
    held: int
    pending: int


@dataclass(slots=True)
class EngineResult:
    """EngineResult is the raw outcome of a run, turned into figures by ``metrics``."""

    jobs: list[SimJob]
    ledger: UsageLedger
    samples: list[CycleSample]
    window: tuple[float, float]
    capacity_gpus: int
    cycles: int = 0
    policy_s: float = 0.0
    policy_max_s: float = 0.0  # the slowest policy call (what one daemon period would spend on it)
    wall_s: float = 0.0
    invalid_placements: int = 0
    held_reservations: int = 0
    notes: list[str] = field(default_factory=list)
    # GPU-time that was busy but useless: (start, end, GPUs) of discarded work and of restores
    waste: list[tuple[float, float, int]] = field(default_factory=list)
    # why the measured jobs waited (shortage, fragmentation, policy): only with SimConfig.waiting_causes
    waiting: WaitingSplit | None = None


class Engine:
    """Engine simulates one trace on one cluster under one policy."""

    def __init__(
        self,
        trace: list[TraceJob],
        cluster: ClusterSpec,
        policy: Callable[[Snapshot, Any], Plan],
        policy_config: Any = None,
        config: SimConfig | None = None,
        origin_submits: list[float] | None = None,
        progress: Callable[[int], None] | None = None,
        router: Router | None = None,
    ) -> None:
        self.config = config or SimConfig()
        self.router = router
        self.notes: list[str] = []
        self.cluster = cluster
        self.policy = policy
        self.policy_config = policy_config
        self.progress = progress
        self.nodes: tuple[NodeState, ...] = tuple(cluster.iter_nodes())
        self.node_by_name = {node.name: node for node in self.nodes}
        self.free = {n.name: [n.capacity.cpus, n.capacity.memory_mib, n.capacity.gpus] for n in self.nodes}
        self.switch_parent = cluster.switch_tree()
        self.capacity_gpus = sum(n.capacity.gpus for n in self.nodes)
        self.cluster_nodes: dict[str, tuple[NodeState, ...]] = {}
        for node in self.nodes:
            self.cluster_nodes.setdefault(cluster_of(node.name), ())
            self.cluster_nodes[cluster_of(node.name)] += (node,)
        self.multi = any(self.cluster_nodes)  # node names are cluster-qualified: the cluster rules apply
        self._check_outages()
        self.outage_ends = sorted({o.end for o in self.config.outages})
        self._ends_seen = 0  # outage ends already passed (each wakes the policy once)
        self._views: dict[frozenset[str], tuple[NodeState, ...]] = {}
        self.jobs = self._make_jobs(trace, origin_submits)
        self.window = self._window()
        weights = dict(cluster.tenants) | dict(self.config.tenant_weights)
        guarantees = guarantees_from_weights(weights, self.capacity_gpus, self.config.guarantee_fraction)
        # fair-share usage is charged with the policy's own cost weights and half-life, as the daemon charges
        usage = usage_config(policy, policy_config, self.config.usage_half_life_s)
        self.ledger = UsageLedger(usage, self.window, weights, guarantees)
        self.pending: dict[int, PendingTask] = {}
        self.running: dict[int, Reservation] = {}
        self.holds: tuple[PriorHold, ...] = ()  # the last plan's holds: the next cycle keeps them, as the daemon does
        self.by_attempt: dict[str, int] = {}
        self.events: list[tuple[float, int, int, int]] = []  # (time, kind, job index, attempt)
        self.samples: list[CycleSample] = []
        self._last_cycle: float | None = None
        # the API's per-tenant submit limits, when the run sets any (issue 16)
        limits = self.config.submit_limits
        self.gate = SimGate(limits, self.config.submit_retry_s) if limits else None
        self.result = EngineResult(self.jobs, self.ledger, self.samples, self.window, self.capacity_gpus, notes=self.notes)
        self.capacity_version = 0  # bumped whenever free capacity changes: the waiting ledger rebuilds its view then
        self.waiting = (WaitingLedger(self.jobs, self.nodes, self.switch_parent, self.window)
                        if self.config.waiting_causes else None)

    # --- setup --------------------------------------------------------------------------------

    def _check_outages(self) -> None:
        """_check_outages refuses an outage of a cluster the site does not have (a typo would be a silent no-op)."""
        for outage in self.config.outages:
            if outage.cluster not in self.cluster_nodes:
                known = ", ".join(sorted(c for c in self.cluster_nodes if c)) or "none: one unnamed cluster"
                raise SimulationError(f"outage of unknown cluster {outage.cluster!r} (clusters: {known})")

    def _warmup_s(self) -> float:
        """_warmup_s is the warm-up in trace seconds (the run's override, else the preset's)."""
        hours = self.config.warmup_hours
        return 3600.0 * (self.cluster.warmup_hours if hours is None else hours)

    def _make_jobs(self, trace: list[TraceJob], origin_submits: list[float] | None) -> list[SimJob]:
        """_make_jobs shapes each trace job into a gang; warm-up is judged on original submit times."""
        worker_gpus = self.cluster.max_gpus_per_node()
        originals = origin_submits or [job.submit_time for job in trace]
        start = originals[0] if originals else 0.0
        warm_end = start + self._warmup_s()
        jobs = []
        for job, original in zip(trace, originals, strict=True):
            # a recorded shape (plan history) is replayed as asked; otherwise split by node size
            if job.workers is not None and job.gpus_per_worker is not None:
                workers, per_worker = job.workers, job.gpus_per_worker
            else:
                workers, per_worker = gang_shape(job.num_gpus, worker_gpus)
            estimate = runtime_estimate(job.duration_s, self.config, job.time_limit_s)
            jobs.append(SimJob(job, job.submit_time, original >= warm_end, workers, per_worker, estimate))
        if jobs and not any(job.measured for job in jobs):
            self.notes.append(WARMUP_TOO_LONG)
            for job in jobs:
                job.measured = True
        return jobs

    def _window(self) -> tuple[float, float]:
        """_window is the measured interval: first measured arrival → last arrival."""
        measured = [job.submit for job in self.jobs if job.measured]
        if not measured:
            return (0.0, 0.0)
        return (min(measured), max(job.submit for job in self.jobs))

    def _first_task(self, index: int, job: SimJob) -> PendingTask:
        """_first_task renders a job as the PendingTask the policy sees."""
        trace = job.trace
        kind = trace.kind
        checkpoints = kind in self.config.checkpoint_kinds
        return PendingTask(
            task_id=f"{trace.job_id}/0",
            job_id=trace.job_id,
            tenant=trace.tenant,
            kind=kind,
            priority_class=self.config.priority_class,
            submit_time=job.submit,
            per_worker=ResourceVector(
                cpus=trace.num_cpus / job.workers,
                memory_mib=trace.memory_mib // job.workers,
                gpus=job.gpus_per_worker,
                gpu_type=trace.gpu_type,
            ),
            workers=job.workers,
            runtime_estimate_s=job.estimate_s,
            topology=self.config.gang_topology if job.workers > 1 else Topology.NONE,
            preemptible=kind in self.config.preemptible_kinds,
            checkpoint_interval_s=self.config.checkpoint_interval_s if checkpoints else None,
            restore_cost_s=self.config.restore_cost_s if checkpoints else 0.0,
            job_name=trace.job_id,
        )

    # --- main loop ----------------------------------------------------------------------------

    def run(self) -> EngineResult:
        """run plays the whole trace until every admitted job has finished."""
        started = time.perf_counter()
        arrivals = sorted(range(len(self.jobs)), key=lambda i: (self.jobs[i].submit, i))
        cursor = 0
        rejected_shapes: dict[tuple, bool] = {}
        while (cursor < len(arrivals) or self.events or (self.gate is not None and self.gate.retries)
               or self._next_outage_end() is not None):
            now = self._next_time(arrivals, cursor)
            changed = self._pop_events(now) | self._outages_ended(now)
            while cursor < len(arrivals) and self.jobs[arrivals[cursor]].submit <= now:
                changed |= self._arrive(arrivals[cursor], now, rejected_shapes)
                cursor += 1
            for index in self.gate.due(now) if self.gate is not None else ():
                changed |= self._queue(index, now)
            if self.progress and cursor:
                self.progress(cursor)
            if changed or self._idle_due(now):
                self._cycles(now)
        self.ledger.advance(max(self.ledger.clock, self.window[1]))
        if self.waiting is not None:
            self.result.waiting = self.waiting.finish(self._last_cycle if self._last_cycle is not None else 0.0)
        self.result.wall_s = time.perf_counter() - started
        return self.result

    def _next_time(self, arrivals: list[int], cursor: int) -> float:
        """_next_time is the next event instant on the period grid, or the next idle cycle if sooner."""
        candidates = []
        if cursor < len(arrivals):
            candidates.append(self.jobs[arrivals[cursor]].submit)
        if self.events:
            candidates.append(self.events[0][0])
        retry = self.gate.next_retry() if self.gate is not None else None
        if retry is not None:
            candidates.append(retry)
        back = self._next_outage_end()
        if back is not None:
            candidates.append(back)
        now = min(candidates)
        step = self.config.cycle_interval_s
        now = math.ceil(now / step) * step if step > 0 else now
        idle = self._next_idle_cycle()
        return min(now, idle) if idle is not None else now

    def _next_idle_cycle(self) -> float | None:
        """_next_idle_cycle is when waiting work is looked at again though nothing happened (None: never)."""
        if not self.pending or self.config.idle_cycle_s <= 0 or self._last_cycle is None:
            return None
        return self._last_cycle + self.config.idle_cycle_s

    def _next_outage_end(self) -> float | None:
        """_next_outage_end is when the next dark cluster comes back, if work waits for it (None: nothing to wake)."""
        if not self.pending or self._ends_seen >= len(self.outage_ends):
            return None
        return self.outage_ends[self._ends_seen]

    def _outages_ended(self, now: float) -> bool:
        """_outages_ended tells whether a cluster came back by ``now``: its capacity is usable again."""
        seen = self._ends_seen
        while self._ends_seen < len(self.outage_ends) and self.outage_ends[self._ends_seen] <= now:
            self._ends_seen += 1
        return self._ends_seen > seen

    def _idle_due(self, now: float) -> bool:
        """_idle_due: work waits and the last cycle is an idle interval old (aging, holds, deadlines move)."""
        due = self._next_idle_cycle()
        return due is not None and now >= due

    def _pop_events(self, now: float) -> bool:
        """_pop_events applies every completion and checkpoint due by ``now``; True if capacity freed."""
        freed = False
        while self.events and self.events[0][0] <= now:
            at, kind, index, attempt = heapq.heappop(self.events)
            job = self.jobs[index]
            if job.attempt != attempt:
                continue  # the attempt was preempted; its events are stale
            if kind == STOP and job.state == JobState.STOPPING:
                self._requeue(index, at)
                freed = True
            elif job.state != JobState.RUNNING:
                continue  # a stopping attempt neither completes nor checkpoints
            elif kind == COMPLETE:
                self._complete(index, at)
                freed = True
            else:
                self._checkpoint(index, at)
        return freed

    def _arrive(self, index: int, now: float, rejected_shapes: dict[tuple, bool]) -> bool:
        """_arrive queues a job, or rejects it at submit when no node set could ever host it."""
        job = self.jobs[index]
        task = self._first_task(index, job)
        if self._never_fits(task, rejected_shapes):
            job.state = JobState.REJECTED
            return False
        if self.router is not None:  # at submit, once: a task is never moved to another cluster afterwards
            clusters = self.router(task, self._view_snapshot(now))
            if clusters:
                task = dataclasses.replace(task, clusters=frozenset(clusters))
                if self._never_fits(task, rejected_shapes):
                    job.state = JobState.REJECTED
                    return False
        job.task = task
        if self.gate is not None and not self.gate.offer(task.tenant, index, now):
            return False  # refused by its tenant's submit limits: its client retries (SimGate)
        return self._queue(index)

    def _never_fits(self, task: PendingTask, rejected_shapes: dict[tuple, bool]) -> bool:
        """_never_fits tells (cached by shape) whether no node set of one allowed cluster could ever host the task."""
        key = (task.per_worker, task.workers, task.clusters) if task.clusters else (task.per_worker, task.workers)
        if key not in rejected_shapes:
            if not self.multi:
                rejected_shapes[key] = never_fits(task, self.nodes)
            else:  # a gang never spans two clusters: it must fit one of those it may use
                allowed = task.clusters or self.cluster_nodes.keys()
                rejected_shapes[key] = all(
                    never_fits(task, self.cluster_nodes[c]) for c in allowed if c in self.cluster_nodes)
        return rejected_shapes[key]

    def _queue(self, index: int, admitted_at: float | None = None) -> bool:
        """_queue makes an admitted job pending; its queue delay counts from its submit, refusals included."""
        job = self.jobs[index]
        task = job.task
        assert task is not None
        if admitted_at is not None:  # out of its client's backlog: the store holds it from now, as the API would
            task = job.task = dataclasses.replace(task, submit_time=admitted_at)
        job.state, job.pending_since = JobState.PENDING, job.submit
        self.pending[index] = task
        self.ledger.running_gpus.setdefault(task.tenant, 0)  # a waiting tenant has a fair-share factor too
        return True

    def _cycles(self, now: float) -> None:
        """_cycles decides at ``now``, then (when asked) judges why each job still waiting waits."""
        self._last_cycle = now
        self._decide(now)
        if self.waiting is not None:
            self.waiting.observe(now, self.free, self.pending, self.capacity_version)

    def _decide(self, now: float) -> None:
        """_decide calls the policy, and again at the same instant while preemptions free capacity."""
        for _ in range(self.config.max_cycles_per_instant):
            if not self.pending:
                return
            plan = self._call_policy(now)
            self._apply(plan, now)
            if not plan.preemptions or self.config.preemption_grace_s > 0:
                return  # with a grace period nothing is freed before the victims stop

    def _call_policy(self, now: float) -> Plan:
        """_call_policy builds the snapshot and times the pure policy call."""
        self.ledger.advance(now)
        nodes, reservations = self._view(now)
        snapshot = Snapshot(
            now=now,
            nodes=nodes,
            reservations=reservations,
            tenants=self.ledger.tenant_states(),
            pending=tuple(self.pending.values()),
            switch_parent=self.switch_parent,
            holds=self.holds,
        )
        started = time.perf_counter()
        plan = self.policy(snapshot, self.policy_config)
        self.holds = carried(plan.held)
        spent = time.perf_counter() - started
        self.result.policy_s += spent
        self.result.policy_max_s = max(self.result.policy_max_s, spent)
        self.result.cycles += 1
        frag = plan.fragmentation
        self.samples.append(CycleSample(now, frag.stranded_gpus, frag.free_gpus, len(plan.held), len(self.pending)))
        self.result.held_reservations += len(plan.held)
        return plan

    def _view(self, now: float) -> tuple[tuple[NodeState, ...], tuple[Reservation, ...]]:
        """_view is the nodes and running work as the policy sees them at ``now``: dark clusters down and untouchable."""
        reservations = tuple(self.running.values())
        dark = dark_clusters(self.config.outages, now) if self.config.outages else frozenset()
        if not dark:
            return self.nodes, reservations
        if dark not in self._views:
            self._views[dark] = tuple(
                dataclasses.replace(n, healthy=False) if cluster_of(n.name) in dark else n for n in self.nodes)
        # nobody can reach a dark cluster to stop its attempts: they run on, and are no victims
        reservations = tuple(
            dataclasses.replace(r, preemptible=False) if r.shares and cluster_of(r.shares[0].node) in dark else r
            for r in reservations)
        return self._views[dark], reservations

    def _view_snapshot(self, now: float) -> Snapshot:
        """_view_snapshot is what a router sees at submit: nodes, running and pending work (no tenants)."""
        nodes, reservations = self._view(now)
        return Snapshot(now=now, nodes=nodes, reservations=reservations, pending=tuple(self.pending.values()),
                        switch_parent=self.switch_parent)

    # --- applying a plan ----------------------------------------------------------------------

    def _apply(self, plan: Plan, now: float) -> None:
        """_apply evicts the plan's victims, then starts its placements."""
        for preemption in plan.preemptions:
            self._preempt(preemption, now)
        task_index = {task.task_id: index for index, task in self.pending.items()}
        for placement in plan.placements:
            index = task_index.get(placement.task_id)
            problem = self._invalid(placement, index, now)
            if problem:
                if self.config.strict:
                    raise SimulationError(f"t={now:.0f}: cannot apply placement of {placement.task_id}: {problem}")
                self.result.invalid_placements += 1
                continue
            self._start(index, placement, now)  # type: ignore[arg-type]

    def _invalid(self, placement: Placement, index: int | None, now: float) -> str:
        """_invalid explains why a placement cannot be applied ('' when it can)."""
        if index is None:
            return "task is not pending"
        task = self.pending[index]
        if len(placement.shares) != task.workers:
            return f"{len(placement.shares)} shares for {task.workers} workers"
        need: dict[str, list[float]] = {}
        for share in placement.shares:
            if share.node not in self.free:
                return f"unknown node {share.node}"
            res = share.resources
            if res.gpus < task.per_worker.gpus:
                return f"share on {share.node} has {res.gpus} GPUs, worker needs {task.per_worker.gpus}"
            acc = need.setdefault(share.node, [0.0, 0.0, 0.0])
            acc[0] += res.cpus
            acc[1] += res.memory_mib
            acc[2] += res.gpus
        for name, (cpus, mem, gpus) in need.items():
            left = self.free[name]
            if cpus > left[0] + 1e-9 or mem > left[1] or gpus > left[2]:
                return f"node {name} over-committed ({gpus} GPUs asked, {left[2]} free)"
            node = self.node_by_name[name]
            if task.per_worker.gpu_type and task.per_worker.gpus and node.capacity.gpu_type != task.per_worker.gpu_type:
                return f"node {name} has {node.capacity.gpu_type} GPUs, task needs {task.per_worker.gpu_type}"
        return self._cluster_problem(placement, task, now) if self.multi else ""

    def _cluster_problem(self, placement: Placement, task: PendingTask, now: float) -> str:
        """_cluster_problem explains a placement that breaks a cluster rule ('' when none): span, -M, dark."""
        used = {cluster_of(share.node) for share in placement.shares}
        if len(used) > 1:
            return f"gang spans clusters {', '.join(sorted(used))}"
        if task.clusters and not used <= task.clusters:
            return f"placed on cluster {', '.join(used)}, task is confined to {', '.join(sorted(task.clusters))}"
        dark = used & dark_clusters(self.config.outages, now)
        if dark:
            return f"cluster {', '.join(dark)} is dark"
        return ""

    def _occupy(self, reservation: Reservation, sign: int) -> None:
        """_occupy takes (sign=+1) or returns (sign=-1) a reservation's shares on the nodes."""
        self.capacity_version += 1
        for share in reservation.shares:
            left = self.free[share.node]
            res = share.resources
            left[0] -= sign * res.cpus
            left[1] -= sign * res.memory_mib
            left[2] -= sign * res.gpus

    def _start(self, index: int, placement: Placement, now: float) -> None:
        """_start launches an attempt decided at ``now``: occupies capacity from now, runs from now + launch delay."""
        job = self.jobs[index]
        task = self.pending.pop(index)
        if self.waiting is not None:
            self.waiting.started(index, job, now)  # waiting for a decision ends here; the launch is no cause
        restore = task.restore_cost_s if job.saved_s > 0 else 0.0
        remaining = job.trace.duration_s - job.saved_s
        begin = now + self.config.launch_delay_s  # Slurm's RUNNING: the queue delay ends, the work (or restore) begins
        job.state, job.attempt_start, job.attempt_restore_s, job.last_checkpoint = JobState.RUNNING, begin, restore, None
        if restore > 0:  # reloading a checkpoint occupies the GPUs without progress
            job.restore_gpu_s += restore * job.gpus
            job.restore_slot = len(self.result.waste)
            self.result.waste.append((begin, begin + restore, job.gpus))
        job.queue_s += begin - job.pending_since
        if job.first_start is None:
            job.first_start, job.first_placed = begin, now
        attempt_id = f"{job.trace.job_id}#{job.attempt}"
        reservation = Reservation(
            attempt_id=attempt_id, task_id=task.task_id, job_id=task.job_id, tenant=task.tenant,
            priority_class=task.priority_class, shares=placement.shares, start_time=begin,
            expected_end=begin + restore + max(job.estimate_s - job.saved_s, remaining),
            restore_cost_s=task.restore_cost_s, preemptible=task.preemptible, kind=task.kind,
            min_runtime_s=self.config.min_runtime_s,
            deadline=task.deadline,
        )
        job.reservation = reservation
        job.cluster = cluster_of(placement.shares[0].node) if placement.shares else ""
        self.running[index] = reservation
        self.by_attempt[attempt_id] = index
        self._occupy(reservation, +1)
        for share in reservation.shares:  # per share: its GPU type sets what a GPU-second costs
            self.ledger.change(now, task.tenant, share.resources.gpus, share.resources.gpu_type)
        heapq.heappush(self.events, (begin + restore + remaining, COMPLETE, index, job.attempt))
        interval = task.checkpoint_interval_s
        if interval and interval < remaining:
            heapq.heappush(self.events, (begin + restore + interval, CHECKPOINT, index, job.attempt))

    def _release(self, index: int, now: float) -> SimJob:
        """_release frees a running job's capacity and forgets its attempt."""
        job = self.jobs[index]
        reservation = self.running.pop(index)
        self.by_attempt.pop(reservation.attempt_id, None)
        self._occupy(reservation, -1)
        for share in reservation.shares:
            self.ledger.change(now, reservation.tenant, -share.resources.gpus, share.resources.gpu_type)
        job.reservation = None
        return job

    def _complete(self, index: int, now: float) -> None:
        """_complete finishes a job."""
        job = self._release(index, now)
        job.state, job.end_time = JobState.DONE, now
        if self.gate is not None:
            self.gate.finished(job.trace.tenant)

    def _checkpoint(self, index: int, now: float) -> None:
        """_checkpoint records a checkpoint so the policy can price preempting this attempt."""
        job = self.jobs[index]
        job.last_checkpoint = now
        reservation = dataclasses.replace(self.running[index], last_checkpoint_time=now)
        self.running[index] = job.reservation = reservation
        interval = self.config.checkpoint_interval_s
        end = job.attempt_start + job.attempt_restore_s + job.trace.duration_s - job.saved_s
        if now + interval < end:
            heapq.heappush(self.events, (now + interval, CHECKPOINT, index, job.attempt))

    def _preempt(self, preemption: Preemption, now: float) -> None:
        """_preempt evicts a victim: work since its last checkpoint is lost; it waits again.

        With ``preemption_grace_s`` > 0 the victim first stays as a *stopping* reservation
        (capacity still held, ``Reservation.stopping``) until the grace ends, as the daemon
        keeps an attempt between the checkpoint signal and its exit.
        """
        index = self.by_attempt.get(preemption.attempt_id)
        job = self.jobs[index] if index is not None else None
        if job is None or job.state != JobState.RUNNING:
            if self.config.strict:
                raise SimulationError(f"t={now:.0f}: preemption of unknown or stopping attempt {preemption.attempt_id}")
            self.result.invalid_placements += 1
            return
        task = job.task
        assert task is not None and index is not None
        if now < job.attempt_start:  # still launching: it never ran, so it loses nothing and just releases
            self._unlaunch(job, now)
            job.preemptions += 1
            self._release(index, now)
            self._requeue(index, now, released=True)
            return
        if job.last_checkpoint is not None and task.checkpoint_interval_s:
            done = job.last_checkpoint - job.attempt_start - job.attempt_restore_s
            job.saved_s += max(0.0, done)
        restored = job.attempt_start + job.attempt_restore_s
        if now < restored:  # stopped while still restoring: the rest of the restore never happened
            job.restore_gpu_s -= (restored - now) * job.gpus
            start, _, gpus = self.result.waste[job.restore_slot]
            self.result.waste[job.restore_slot] = (start, now, gpus)
        # the work since the last checkpoint (or since the restore ended) is thrown away
        lost_since = max(job.last_checkpoint if job.last_checkpoint is not None else job.attempt_start, restored)
        if now > lost_since:
            job.discarded_gpu_s += (now - lost_since) * job.gpus
            self.result.waste.append((lost_since, now, job.gpus))
        job.preemptions += 1
        grace = self.config.preemption_grace_s
        if grace <= 0:
            self._release(index, now)
            self._requeue(index, now, released=True)
            return
        job.state = JobState.STOPPING
        self.running[index] = job.reservation = dataclasses.replace(self.running[index], stopping=True)
        heapq.heappush(self.events, (now + grace, STOP, index, job.attempt))

    def _unlaunch(self, job: SimJob, now: float) -> None:
        """_unlaunch takes back what ``_start`` counted ahead for an attempt stopped at ``now``, before it ran.

        Its queue delay ran to its start, which never came: it counts to ``now`` instead, and the
        job waits again from ``now``; a first attempt leaves the job without a first start; its
        restore (after the start) never happened.
        """
        job.queue_s -= job.attempt_start - now
        if job.first_start == job.attempt_start:  # an earlier attempt started before this one was decided
            job.first_start = job.first_placed = None
        if job.attempt_restore_s > 0:
            job.restore_gpu_s -= job.attempt_restore_s * job.gpus
            start, _, gpus = self.result.waste[job.restore_slot]
            self.result.waste[job.restore_slot] = (start, start, gpus)

    def _requeue(self, index: int, now: float, released: bool = False) -> None:
        """_requeue frees a stopped victim (unless already released) and makes it pending again."""
        job = self._release(index, now) if not released else self.jobs[index]
        task = job.task
        assert task is not None
        job.attempt += 1
        job.state, job.pending_since = JobState.PENDING, now
        job.task = dataclasses.replace(task, runtime_estimate_s=max(job.estimate_s - job.saved_s, 1.0))
        self.pending[index] = job.task
