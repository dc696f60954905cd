"""The metasched allocation policy: ``schedule(snapshot, config) -> Plan``, pure, no I/O.

One cycle, in order:

1. Index the snapshot: group identical nodes into equivalence classes and compute free
   capacity per node in plain numbers (capacity.py), tenants' shares (fairshare.py) and GPU
   usage against quotas (quota.py).
2. Order the pending tasks (ordering.py): aged tasks first (bounded waiting), then deadlines
   whose slack ran out, then priority classes; inside a class tenants take turns by lowest
   weighted dominant share, re-read after every placement.
3. For each task, run the hard filters over node classes (feasibility.py). A task no node
   could ever host gets UnschedulableAndUnresolvable; one whose hosts are all down waits.
   Its clusters are narrowed first: -M, its tenant's clusters (tenant_clusters.py), then
   required data and a retry's checkpoint (data_locality.py).
4. Check quota last among the filters (quota.py): a tenant over its limit waits; its reason
   is WaitingForQuota only when the limit is what stops it (with the other tenants' work gone
   the task would fit beside its tenant's own), else the capacity reason of step 6.
5. Fit: best fit for one worker, gang placement on the fewest switches for many (placement.py,
   gang.py), on a preferred data cluster first when it has room there. Held nodes take only
   work that cannot delay their holder (backfill). Shapes that failed are cached for the
   cycle: capacity only shrinks while a plan is built.
6. If it does not fit: diagnose why (explain.py); try preemption where a reason allows it
   (preemption.py: reclaim guarantee, higher class, endangered deadline; least lost work);
   otherwise, for the first few blocked tasks, hold nodes at their earliest start
   (backfill.py). A gang's hold outlives its cycle (``Snapshot.holds``): the next cycle keeps
   its place among the held reservations, so tasks ahead in line cannot take it, and the gang
   re-holds at its turn, before any later task; the hold lapses once the gang is placed or
   waits for anything but capacity. The nodes a preemption frees are kept for its beneficiary
   outright: next cycle even tasks ahead of it in line may use only what it leaves spare there.
7. Report fragmentation after all placements (fragmentation.py).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from meta.model.kinds import Topology
from meta.model.resources import ResourceVector
from meta.policy import explain
from meta.policy.backfill import Release, earliest_start, nodes_when_all_end, releases_of
from meta.policy.capacity import Capacity
from meta.policy.cluster_quota import cluster_quota
from meta.policy.config import SchedulerConfig
from meta.policy.data_locality import pin, preferred, waits_for_pin
from meta.policy.equivalence import NodeClass
from meta.policy.fairshare import FairShare
from meta.policy.feasibility import Verdict, evaluate
from meta.policy.fragmentation import report
from meta.policy.gang import Pick
from meta.policy.gpu_keys import gpu_capacity
from meta.policy.inventory import inventory_for
from meta.policy.ordering import is_aged, is_urgent, ordered
from meta.policy.placement import fit, gang_candidates, type_groups
from meta.policy.plan import (
    HeldReservation,
    PendingReason,
    Placement,
    Plan,
    Preemption,
    ReasonCode,
)
from meta.policy.preemption import Evictable, candidates, choose, evictable, heaviest_first, stopping
from meta.policy.quota import QuotaLedger
from meta.policy.recorder import Recorder
from meta.policy.repeat import Outcome, RepeatMemo, signature, worth_it
from meta.policy.shape import Shape, ShapeMemo, shape_of
from meta.policy.slurmlike import multifactor
from meta.policy.snapshot import NodeShare, PendingTask, Reservation, Snapshot
from meta.policy.tenant_clusters import allowed_clusters, outside_tenant
from meta.policy.throttle import Throttle

# Reasons after which a task may still preempt or get a held start: it is short of capacity,
# not of quota, health or possibility.
_CAPACITY_CODES = frozenset({
    ReasonCode.NO_FEASIBLE_NODE,
    ReasonCode.WAITING_FOR_GANG_CAPACITY,
    ReasonCode.TOPOLOGY_UNSATISFIED,
    ReasonCode.LOWER_FAIR_SHARE,
    ReasonCode.LOWER_PRIORITY,
    ReasonCode.BLOCKED_BY_RESERVATION,
})


def schedule(snapshot: Snapshot, config: SchedulerConfig | None = None, record: int = 0,
             repeats: bool | None = None, shapes: ShapeMemo | None = None) -> Plan:
    """schedule decides one cycle: placements, preemptions, held nodes and a reason per waiter.

    With ``record`` > 0 the plan also carries the decisions on record (decisions.py): each
    placement's, preemption's and hold's order key and up to ``record`` alternatives of each kind.
    ``repeats``: reuse a repeat's outcome (repeat.py) — by default on long queues only; True or
    False forces it (the tests compare the two). ``shapes``: the tasks' shapes kept from the last
    pass (shape.ShapeMemo; the daemon keeps one), exact for the same task objects.
    """
    run = SchedulePass(snapshot, config or SchedulerConfig(), record, repeats, shapes)
    within = run.within_guarantee if run.quota.any_guarantee() else None
    trace = run.rec.trace if run.rec else None
    run.keep_promises()
    # tenant_order multifactor: Slurm's priority (one formula with the slurm-like baseline) picks each place's tenant
    priority = multifactor(snapshot) if run.cfg.tenant_order == "multifactor" else None
    for task in ordered(snapshot.pending, run.fair, run.cfg, snapshot.now, run.rank, within, trace, priority):
        run.schedule_one(task)
    run.plan.fragmentation = report(run.cap, run.shapes.values())
    if shapes is not None:
        shapes.keep_only(snapshot.pending)
    if run.rec:
        run.plan.decisions, run.plan.context = run.rec.finish(), run.rec.context
    return run.plan


class SchedulePass:
    """SchedulePass is the mutable working state of one schedule() call (one pass, not the daemon's cycle)."""

    def __init__(self, snapshot: Snapshot, config: SchedulerConfig, record: int = 0,
                 repeats: bool | None = None, shapes: ShapeMemo | None = None) -> None:
        self.snap, self.cfg, self.now = snapshot, config, snapshot.now
        self.shape_of: Callable[[PendingTask], Shape] = shape_of if shapes is None else shapes.shape
        self.repeats = RepeatMemo() if worth_it(len(snapshot.pending), repeats) else None
        self._marked: tuple | None = None  # the state's mark after the last task, while nothing else changed it
        self._stored_mark: tuple | None = None  # the mark the last repeat outcome was stored under
        self.inv = inventory_for(snapshot.nodes, snapshot.switch_parent)
        self.classes = self.inv.classes
        self.cap = Capacity(self.inv, snapshot.reservations)
        self._initial: Capacity | None = None
        self.fair = FairShare(snapshot.tenants, config, self.inv, self.cap.usage)
        by_cluster = config.limit_scope == "cluster" and len(set(self.inv.cluster)) > 1
        limited = any(t.limit or (by_cluster and t.cluster_limits) for t in snapshot.tenants)
        reach = gpu_capacity(self.inv.gpu_type, self.inv.gpu) if limited else None
        per_cluster = None
        if limited and by_cluster:
            held = (entry[:4] for _, entry in self.cap.ledger.held.values())
            own = {t.name: t.cluster_limits for t in snapshot.tenants if t.cluster_limits}
            per_cluster = cluster_quota(self.inv.cluster, self.inv.gpu_type, self.inv.gpu, held, own)
        self.quota = QuotaLedger(snapshot.tenants, self.cap.usage, reach, per_cluster)
        self.rec = Recorder(record, snapshot, config, self.fair, self.quota) if record > 0 else None
        self.plan = Plan(inventory_version=snapshot.inventory_version)
        self.shapes: dict[str, Shape] = {}
        self._ranks: dict[tuple, int] = {}
        self._pool: tuple[list[Evictable], list[Evictable]] | None = None
        self._lowest_victim_rank: int | None = None
        self._any_stopping = False
        self._attributions: dict[tuple, PendingReason] = {}
        self.labels: dict[str, str] = {}  # job id -> the id users see, for jobs that hold nodes
        self.verdicts: dict[Shape, Verdict] = self.inv.verdicts  # filters depend on the inventory only
        self.failed: dict[object, float] = {}  # shape -> earliest end that already failed to fit
        self.diagnoses: dict[object, PendingReason | None] = {}
        self.releases: list[Release] | None = None
        self.placed: list[Release] = []
        self.consumers: dict[int, dict[str, tuple[int, float, str]]] = {}  # class -> tenant -> (rank, share, job)
        self.vectors: dict[tuple, ResourceVector] = {}
        self.victims: set[str] = set()
        self.preempt_attempts = 0
        self.holds_made = 0  # backfill holds, including keep-from-gangs marks and kept gangs' places
        self.promised: set[str] = set()  # gangs held last cycle whose place among the holds is kept
        self.kept: set[str] = set()  # those whose turn came: they re-hold even when the cap is reached
        self.bound: dict[str, list[int]] = {}  # preemption beneficiaries -> nodes kept for them until their turn
        self.unbound: set[str] = set()  # those whose turn came: they may re-hold nodes still stopping (_try_preempt)
        self.waiting_ahead = False  # a task ahead in line waits for capacity: later placements backfill
        self.preempt_failed: dict[tuple, list[tuple]] = {}  # kind of task -> sizes that found no victims
        self.any_preemptible = bool(self.cap.ledger.evictable)  # preemptible or stopping work exists
        self.throttle = Throttle(snapshot.reservations)
        self.own: dict[str, list[tuple[int, int, float, int, int]]] = {}  # tenant -> this cycle's takes and holds
        self._alone: dict[str, tuple[int, Capacity]] = {}  # tenant -> (len(own) it was built at, capacity)
        self._binds: dict[tuple, bool] = {}  # (tenant, len(own), shape, classes) -> fits with its own work alone
        # tenants an admin confined to some clusters (issue 26): their tasks' -M lists are narrowed to them
        self.confined = {t.name: t.clusters for t in snapshot.tenants if t.clusters}

    def rank(self, task: PendingTask | Reservation) -> int:
        """rank is a task's (or reservation's) class rank, memoised per (class, kind, has deadline)."""
        key = (task.priority_class, task.kind, task.deadline is not None)
        value = self._ranks.get(key)
        if value is None:
            value = self._ranks[key] = self.cfg.rank(task.priority_class, task.kind, task.deadline)
        return value

    def within_guarantee(self, task: PendingTask) -> bool:
        """within_guarantee tells whether the task fits inside its tenant's guarantee at cycle start."""
        r = task.per_worker
        return self._guaranteed(task.tenant, r.gpu_type if r.gpus else None, r.gpus * task.workers)

    def _guaranteed(self, tenant: str, gpu_type: str | None, gpus: int) -> bool:
        """_guaranteed tells whether ``gpus`` more count as the tenant's own (see guarantee_rounds_up_to_task)."""
        if gpus and self.cfg.guarantee_rounds_up_to_task:
            gpus = 1  # any guarantee left admits the whole task
        return self.quota.below_guarantee(tenant, gpu_type, gpus)

    def _rank_of_key(self, key: tuple) -> int:
        """_rank_of_key is rank() for a precomputed (class, kind, has deadline) key."""
        value = self._ranks.get(key)
        if value is None:
            priority_class, kind, has_deadline = key
            value = self._ranks[key] = self.cfg.rank(priority_class, kind, 0.0 if has_deadline else None)
        return value

    @property
    def initial(self) -> Capacity:
        """initial is the cycle-start capacity, built only when a diagnosis needs it."""
        if self._initial is None:
            self._initial = self.cap.at_cycle_start()
        return self._initial

    # --- the per-task pipeline ----------------------------------------------------------------

    def schedule_one(self, task: PendingTask) -> None:
        """schedule_one decides one pending task: as the identical task before it when nothing changed since (repeat.py)."""
        if not self._memoisable(task):
            self._schedule_one(task)
            self._marked = None
            return
        mark = self._marked or self._mark()  # only _schedule_one changes the state a mark sums up
        raw = self.shape_of(task)  # computed once: the signature and the pipeline's _shape both take it
        sig = None
        if mark == self._stored_mark:  # an outcome stored under this very state may be this task's
            sig = self._signature(task, raw)
            outcome = self.repeats.get(sig, mark)  # type: ignore[union-attr]
            if outcome is not None:
                self._repeat(task, outcome)
                self._marked = mark
                return
        waits = self.rec.waits if self.rec else 0
        self._schedule_one(task, raw)
        after = self._marked = self._mark()
        reason = self.plan.reasons.get(task.task_id)
        if reason is not None and after == mark:
            recorded = bool(self.rec) and self.rec.waits != waits  # type: ignore[union-attr]
            sig = sig or self._signature(task, raw)
            self.repeats.put(sig, Outcome(mark, self.shapes.get(task.task_id), reason, recorded))  # type: ignore[union-attr]
            self._stored_mark = mark

    def _memoisable(self, task: PendingTask) -> bool:
        """_memoisable: repeats are on and the task's outcome does not depend on who it is (a throttle, a kept place)."""
        if self.repeats is None or task.max_parallel is not None:
            return False
        tid = task.task_id
        return not (tid in self.promised or tid in self.bound or tid in self.kept or tid in self.unbound)

    def _signature(self, task: PendingTask, shape: Shape) -> tuple:
        """_signature is the task's repeat signature (repeat.py); ``shape`` is its shape_of."""
        aged = is_aged(task, self.now, self.cfg)
        urgent = not aged and is_urgent(task, self.now, self.cfg)
        return signature(task, shape, aged, urgent)

    def _mark(self) -> tuple:
        """_mark sums up the pass's mutable state: while it is unchanged, an identical task goes the same way."""
        plan = self.plan
        return (len(plan.placements), len(plan.preemptions), len(plan.held), self.holds_made, self.preempt_attempts,
                len(self.victims), self.waiting_ahead, len(self.bound), len(self.unbound), len(self.kept),
                len(self.promised))  # fmt: skip

    def _repeat(self, task: PendingTask, outcome: Outcome) -> None:
        """_repeat gives a task the outcome of the identical one before it."""
        if outcome.shape is not None:
            self.shapes[task.task_id] = outcome.shape
        if outcome.recorded and self.rec:
            self.rec.waited(task, outcome.reason)
        self.plan.reasons[task.task_id] = outcome.reason

    def _schedule_one(self, task: PendingTask, raw: Shape | None = None) -> None:
        """_schedule_one runs filters, quota, fit and the fallbacks for one pending task (``raw``: its shape_of, if known)."""
        if task.task_id in self.promised:
            self._lift_promise(task.task_id)
        if task.task_id in self.bound:
            self._unbind(task.task_id)
        throttled = self.throttle.blocks(task)
        if throttled is not None:
            self.plan.reasons[task.task_id] = throttled
            return
        shape, verdict = self._shape(task, raw)
        self.shapes[task.task_id] = shape
        if verdict.reason is not None:
            self.plan.reasons[task.task_id] = verdict.reason
            return
        # Quota last among the filters: it depends on usage, which this cycle changes.
        shape, verdict, exceeded = self._within_cluster_limits(task, shape, verdict)
        self.shapes[task.task_id] = shape
        if exceeded is None:
            exceeded = self.quota.limit_exceeded(task.tenant, shape.gpu_type, shape.total_gpus)
        if exceeded is not None:
            self._over_limit(task, shape, verdict.classes, exceeded)
            return
        classes = verdict.classes
        if shape.gpus and shape.gpu_type is None:
            # An any-type request may only land on types whose limit still has room for it.
            classes = self._within_type_limits(task, shape, classes)
            if not classes:
                return
        end = self.now + task.runtime_estimate_s
        narrow, picks = self._fit_preferred(task, shape, classes, end) if task.data_cluster else (shape, [])
        if picks:
            self._place(task, narrow, picks, end)
            return
        picks = self._fit(shape, classes, end)
        if picks:
            self._place(task, shape, picks, end)
            return
        self._wait(task, shape, classes)

    def _wait(self, task: PendingTask, shape: Shape, classes: Sequence[NodeClass],
              preempt: bool = True, hold: bool = True) -> None:
        """_wait names why a task that did not fit waits, after trying preemption and a held start."""
        reason = self._diagnose(task, shape, classes)
        if reason.code in _CAPACITY_CODES:
            self.waiting_ahead = True
            if (preempt and self._try_preempt(task, shape, classes)) or (
                hold and self._try_hold(task, shape, classes, reason)
            ):
                return
        if self.rec:
            self.rec.waited(task, reason)
        self.plan.reasons[task.task_id] = reason

    def _shape(self, task: PendingTask, raw: Shape | None = None) -> tuple[Shape, Verdict]:
        """_shape is the task's shape and the filters' verdict on it (``raw``: its shape_of, if known)."""
        shape = raw or self.shape_of(task)
        tenant = self.confined.get(task.tenant)
        if tenant:
            outside = outside_tenant(task, tenant)
            if outside is not None:
                return shape, Verdict((), outside)
            shape = shape._replace(clusters=allowed_clusters(shape.clusters, tenant))
        if task.data_cluster or task.checkpoint_cluster:
            clusters, unpinnable = pin(task, shape.clusters)
            if unpinnable is not None:
                return shape, Verdict((), unpinnable)
            shape = shape._replace(clusters=clusters)
        verdict = self._verdict(shape)
        never = ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE
        if verdict.reason is not None and shape.avoid and verdict.reason.code is never:
            # Nodes are avoided after they failed the task; if avoiding them leaves no node that
            # could ever host it, avoiding them would strand it for good: use them after all.
            shape = shape._replace(avoid=frozenset())
            verdict = self._verdict(shape)
        if verdict.reason is not None and (task.data_required or task.checkpoint_cluster):
            verdict = Verdict((), waits_for_pin(task, verdict.reason))
        return shape, verdict

    def _within_cluster_limits(self, task: PendingTask, shape: Shape,
                               verdict: Verdict) -> tuple[Shape, Verdict, tuple[str, int, int] | None]:
        """_within_cluster_limits narrows the task to clusters where its tenant's limits have room (per-cluster limits).

        Returns the shape and verdict to go on with, and the limit that stops the task when no
        cluster it may use (and could host it) has room; a site of one cluster is left alone.
        """
        ledger, limits = self.quota.per_cluster, self.quota.limit.get(task.tenant) or {}
        if ledger is None or not ledger.limited(task.tenant, limits):
            return shape, verdict, None
        allowed = shape.clusters or ledger.clusters
        room = ledger.with_room(limits, task.tenant, shape.gpu_type, shape.total_gpus, allowed)
        if room >= allowed:
            return shape, verdict, None
        broken = ledger.broken_everywhere(limits, task.tenant, shape.gpu_type, shape.total_gpus, allowed - room)
        narrow = shape._replace(clusters=room)
        narrowed = self._verdict(narrow) if room else None
        if narrowed is None or narrowed.reason is not None:
            return shape, verdict, broken
        return narrow, narrowed, None

    def _fit_preferred(self, task: PendingTask, shape: Shape, classes: Sequence[NodeClass],
                       end: float) -> tuple[Shape, list[Pick]]:
        """_fit_preferred tries the task's preferred data cluster first; ([] when it has no room there, or no preference).

        Only free capacity on that cluster counts: with no room there this cycle the task is placed
        elsewhere (the caller's fit) rather than wait for it.
        """
        cluster = preferred(task, shape.clusters)
        if cluster is None:
            return shape, []
        narrow = shape._replace(clusters=frozenset({cluster}))
        verdict = self._verdict(narrow)
        if verdict.reason is not None:
            return shape, []
        ids = {c.id for c in verdict.classes}
        return narrow, self._fit(narrow, [c for c in classes if c.id in ids], end)

    def _verdict(self, shape: Shape) -> Verdict:
        """_verdict runs the filter chain once per distinct shape per cycle."""
        verdict = self.verdicts.get(shape)
        if verdict is None:
            verdict = evaluate(shape, self.classes, self.cap.names, self.cap.leaf)
            self.verdicts[shape] = verdict
        return verdict

    def _within_type_limits(self, task: PendingTask, shape: Shape, classes: tuple[NodeClass, ...]) -> tuple:
        """_within_type_limits drops GPU types the tenant's limits exclude, or records the quota reason."""
        allowed = tuple(c for c in classes
                        if self.quota.limit_exceeded(task.tenant, c.gpu_type, shape.total_gpus) is None)
        if not allowed:
            exceeded = self.quota.limit_exceeded(task.tenant, classes[0].gpu_type, shape.total_gpus) or ("*", 0, 0)
            self._over_limit(task, shape, classes, exceeded)
        return allowed

    def _over_limit(self, task: PendingTask, shape: Shape, classes: Sequence[NodeClass],
                    exceeded: tuple[str, int, int]) -> None:
        """_over_limit gives a task over its tenant's limit the reason for what really stops it.

        The task is never placed here. A limit at or above the cluster's capacity cannot be what
        stops it (usage counts every node the capacity does, so the task cannot fit either): it
        waits as it would with no limit, held start included; only preemption is left out, as
        its victims' capacity would still be over the limit. Below that, WaitingForQuota only if
        raising the limit would help: with every other tenant's work gone the task would fit
        beside its own tenant's. Otherwise the tenant's own work leaves no room whatever the
        limit, and the capacity reason says so, without a hold the limit might still leave idle.
        """
        key, used, limit = exceeded
        if not self.quota.reachable(key, limit):
            self._wait(task, shape, classes, preempt=False)
        elif self._fits_alone(task.tenant, shape, classes):
            room = bool(self._fit(shape, classes, self.now + task.runtime_estimate_s))
            self.plan.reasons[task.task_id] = explain.quota(task.tenant, key, used, limit, shape.total_gpus, room)
        else:
            self._wait(task, shape, classes, preempt=False, hold=False)

    def _fits_alone(self, tenant: str, shape: Shape, classes: Sequence[NodeClass]) -> bool:
        """_fits_alone tells whether the shape fits the cluster with only ``tenant``'s own work on it."""
        memo = (tenant, len(self.own.get(tenant, ())), shape, tuple(c.id for c in classes))
        found = self._binds.get(memo)
        if found is None:
            alone = self._alone_capacity(tenant)
            found = self._binds[memo] = bool(fit(alone, shape, classes, float("inf"), self.cfg.gpu_cost))
        return found

    def _alone_capacity(self, tenant: str) -> Capacity:
        """_alone_capacity is the cluster's capacity minus the tenant's running work and this cycle's takes."""
        own = self.own.get(tenant, [])
        built = self._alone.get(tenant)
        if built is None:
            free = [list(self.inv.gpu), list(self.inv.cpu), list(self.inv.mem), list(self.inv.sto)]
            for shares in (e[0] for _, e in self.cap.ledger.held.values() if e[1] == tenant):
                for i, *amounts in shares:
                    for arr, amount in zip(free, amounts, strict=True):
                        arr[i] -= amount
            built = (0, self.initial.with_free((free[0], free[1], free[2], free[3])))
        done, alone = built
        for i, g, c, m, st in own[done:]:  # this cycle's takes since it was built
            alone.take(i, g, c, m, st, float("inf"))
        self._alone[tenant] = (len(own), alone)
        return alone

    def _took(self, tenant: str, shape: Shape, picks: list[Pick]) -> None:
        """_took notes what a tenant took or had held for it this cycle, for _alone_capacity."""
        self.own.setdefault(tenant, []).extend(
            (i, n * shape.gpus, n * shape.cpus, n * shape.mem, n * shape.sto) for i, n in picks)

    def _fit(self, shape: Shape, classes: Sequence[NodeClass], end: float) -> list[Pick]:
        """_fit tries free capacity, skipping shapes that already failed for an earlier-ending task."""
        key = (shape, tuple(c.id for c in classes)) if shape.gpu_type is None else shape
        failed_end = self.failed.get(key)
        if failed_end is not None and end >= failed_end:
            return []  # capacity only shrinks within a cycle; a longer task cannot fit either
        picks = fit(self.cap, shape, classes, end, self.cfg.gpu_cost)
        if not picks:
            self.failed[key] = end if failed_end is None else min(failed_end, end)
        return picks

    def _vector(self, task: PendingTask, gpu_type: str | None) -> ResourceVector:
        """_vector is the per-worker request with the node's actual GPU type filled in."""
        r = task.per_worker
        key = (r, gpu_type)
        vec = self.vectors.get(key)
        if vec is None:
            vec = r if not r.gpus or r.gpu_type == gpu_type else r.model_copy(update={"gpu_type": gpu_type})
            self.vectors[key] = vec
        return vec

    def _place(self, task: PendingTask, shape: Shape, picks: list[Pick], end: float) -> None:
        """_place commits a fit to the working capacity, quota, fair share and the plan."""
        cap = self.cap
        rank = self.rank(task)
        share_before = self.fair.share(task.tenant)
        shares: list[NodeShare] = []
        gpu_type = cap.gpu_type[picks[0][0]] if shape.gpus else None
        vec = self._vector(task, gpu_type)
        for i, count in picks:
            g, c, m, s = count * shape.gpus, count * shape.cpus, count * shape.mem, count * shape.sto
            cap.take(i, g, c, m, s, end)
            self.placed.append((end, i, g, c, m, s))
            shares.extend([NodeShare(cap.names[i], vec)] * count)
            self.consumers.setdefault(cap.cls[i], {})[task.tenant] = (rank, share_before, task.job_id)
        self.quota.charge(task.tenant, gpu_type, shape.total_gpus, cap.cluster[picks[0][0]])
        self._took(task.tenant, shape, picks)
        self.fair.charge(task.tenant, gpu_type, shape.total_gpus, shape.cpus * shape.workers,
                         shape.mem * shape.workers)
        # Backfill is going past work ahead in line that waits for capacity, not merely a hold existing.
        backfilled = self.waiting_ahead
        self.throttle.started(task)
        self.plan.placements.append(Placement(
            task.task_id, task.job_id, tuple(shares), backfilled=backfilled,
            reason="backfilled: work ahead in line did not fit, and this delays no held start" if backfilled else "",
        ))
        if self.rec:
            self.rec.placed(task, self.plan.placements[-1], share_before)

    # --- why it waits ---------------------------------------------------------------------------

    def _diagnose(self, task: PendingTask, shape: Shape, classes: Sequence[NodeClass]) -> PendingReason:
        """_diagnose names the cause: held nodes, capacity taken this cycle, topology or shortage."""
        key = (shape, tuple(c.id for c in classes)) if shape.gpu_type is None else shape
        if key not in self.diagnoses:
            self.diagnoses[key] = self._capacity_reason(shape, classes)
        reason = self.diagnoses[key]
        if reason is not None:
            return reason
        return self._attribute(task, shape, classes)

    def _capacity_reason(self, shape: Shape, classes: Sequence[NodeClass]) -> PendingReason | None:
        """_capacity_reason explains a shape's failure; None means others took capacity this cycle."""
        cost = self.cfg.gpu_cost
        never = float("inf")
        held = self.plan.held or self.holds_made or self.bound
        if held and fit(self.cap, shape, classes, never, cost, ignore_holds=True):
            job = self._blocking_job(classes)
            return explain.blocked(shape, job, self.labels.get(job))
        if fit(self.initial, shape, classes, never, cost):
            return None
        if shape.topology is Topology.REQUIRE_SAME_SWITCH and fit(
            self.cap, shape, classes, never, cost, ignore_holds=True, topology=Topology.NONE
        ):
            return explain.topology_unsatisfied(shape)
        best_node, best_free = self._most_free(shape, classes)
        fit_workers = 0
        if shape.workers > 1:
            cands = gang_candidates(self.cap, shape, classes, never)
            fit_workers = min(shape.workers - 1, sum(n for _, n in cands))
        usable = self._usable(shape)
        free_total = sum(g * (len(b) if usable is None else sum(map(usable, b)))
                         for c in classes for g, b in enumerate(self.cap.buckets[c.id]))  # fmt: skip
        return explain.no_capacity(shape, best_node, best_free, fit_workers, free_total)

    def _blocking_job(self, classes: Sequence[NodeClass]) -> str:
        """_blocking_job names the job holding nodes the task could otherwise use."""
        for c in classes:
            for i in c.nodes:
                job = self.cap.hold_job[i] or self.cap.gang_blocked[i]
                if job:
                    return job
        return self.plan.held[0].job_id

    def _usable(self, shape: Shape) -> Callable[[int], bool] | None:
        """_usable tells, for messages, whether a node is on a cluster the shape may use (None: any; a class may span clusters)."""
        if not shape.clusters:
            return None
        return lambda i: self.inv.cluster[i] in shape.clusters

    def _most_free(self, shape: Shape, classes: Sequence[NodeClass]) -> tuple[str | None, int]:
        """_most_free finds the feasible node with the most free GPUs, for messages."""
        best, most = None, 0
        usable = self._usable(shape)
        for c in classes:
            buckets = self.cap.buckets[c.id]
            for free in range(len(buckets) - 1, most, -1):
                node = next((i for i in buckets[free] if usable is None or usable(i)), None)
                if node is not None:
                    best, most = self.cap.names[node], free
                    break
        return best, most

    def _attribute(self, task: PendingTask, shape: Shape, classes: Sequence[NodeClass]) -> PendingReason:
        """_attribute names who took the capacity the task would have had at the start of the cycle."""
        rank = self.rank(task)
        memo = (shape, task.tenant, rank, len(self.plan.placements))
        reason = self._attributions.get(memo)
        if reason is None:
            reason = self._attributions[memo] = self._attribute_uncached(task, rank, classes)
        return reason

    def _attribute_uncached(self, task: PendingTask, rank: int, classes: Sequence[NodeClass]) -> PendingReason:
        """_attribute_uncached looks through who placed work on the task's classes this cycle."""
        others = [(t, info) for c in classes for t, info in self.consumers.get(c.id, {}).items() if t != task.tenant]
        higher = [(t, info) for t, info in others if info[0] > rank]
        if higher:
            tenant, (other_rank, _, job) = max(higher, key=lambda x: x[1][0])
            name = next((n for n, r in self.cfg.priority_classes.items() if r == other_rank), str(other_rank))
            return explain.lower_priority(name, tenant, job)
        if others:
            tenant, (_, their, _) = min(others, key=lambda x: x[1][1])
            return explain.lower_fair_share(tenant, their, self.fair.share(task.tenant), task.tenant)
        return PendingReason(
            ReasonCode.NO_FEASIBLE_NODE,
            f"{task.tenant}'s own earlier tasks took the free capacity this cycle",
            "would start when capacity frees up",
        )

    # --- preemption -------------------------------------------------------------------------------

    def _try_preempt(self, task: PendingTask, shape: Shape, classes: Sequence[NodeClass]) -> bool:
        """_try_preempt evicts the least lost work when a reason allows it, and holds the freed nodes."""
        if not (self.cfg.preemption_enabled and self.any_preemptible):
            return False
        if self._lowest_victim_rank is None:
            entries = self.cap.ledger.evictable.values()
            self._any_stopping = any(e[0].stopping for e in entries)
            keys = {e[1] for e in entries}
            self._lowest_victim_rank = min((self._rank_of_key(k) for k in keys), default=1 << 30)
        # A beneficiary whose victims are still stopping re-holds their nodes whatever the cycle's budget
        rebind = task.task_id in self.unbound
        if self.preempt_attempts >= self.cfg.max_preemption_attempts and not rebind:
            return False
        rank = self.rank(task)
        gpu_type = shape.gpu_type
        reclaim = self._guaranteed(task.tenant, gpu_type, shape.total_gpus)
        urgent = is_urgent(task, self.now, self.cfg)
        if not reclaim and not urgent and rank <= self._lowest_victim_rank and not self._any_stopping:
            return False  # no rule allows evicting anything for this task
        patient = reclaim and not urgent and rank <= self._lowest_victim_rank and not rebind
        if patient and self._frees_soon(shape, classes):
            return False  # running work frees the capacity soon enough: not worth anyone's lost work
        key = (shape.gpu_type, shape.topology, shape.partition, shape.network, shape.avoid, rank, reclaim, urgent,
               task.tenant if reclaim else "")
        size = (shape.gpus, shape.cpus, shape.mem, shape.sto, shape.workers)
        failed = self.preempt_failed.setdefault(key, [])
        if any(all(a >= b for a, b in zip(size, f, strict=True)) for f in failed):
            return False  # a task no bigger already found no victims this cycle
        self.preempt_attempts += 1
        if self._pool is None:
            self._pool = evictable(self.cap, self._rank_of_key, self.now)
        pool, leaving_pool = self._pool
        feasible = {i for c in classes for i in c.nodes}
        # A reclaim only the rounding up allows leaves the task's tenant borrowing: see candidates()
        rounded = reclaim and task.preemptible and not self.quota.below_guarantee(task.tenant, gpu_type,
                                                                                  shape.total_gpus)
        lighter = None
        if reclaim and self.cfg.reclaim_spares_lighter:
            own = self.fair.share(task.tenant)
            lighter = lambda tenant: self.fair.share(tenant) < own  # noqa: E731 - a closure over this task's share
        if reclaim and not urgent and self.cfg.reclaim_victims == "heaviest":
            pool = heaviest_first(pool, self.fair.share)
        victims = candidates(task, rank, reclaim, urgent, pool, self.victims, feasible, self.quota, self.cfg,
                             rounded=rounded, lighter=lighter)
        leaving = stopping(leaving_pool, self.victims, feasible)
        chosen = None
        if victims or leaving:
            for group in type_groups(shape, classes, self.cfg.gpu_cost):  # never mix GPU types
                chosen = choose(self.cap, shape, group, victims, leaving)
                if chosen:
                    break
        if not chosen:
            failed.append(size)
            return False
        evicted, picks, extra = chosen
        for v in evicted:
            self.victims.add(v.res.attempt_id)
            if not v.res.stopping:
                self.plan.preemptions.append(Preemption(
                    v.res.attempt_id, v.res.task_id, v.why, v.lost, for_task=task.task_id))
        evicted = [v for v in evicted if not v.res.stopping]
        if self.rec:
            made = self.plan.preemptions[len(self.plan.preemptions) - len(evicted):]
            self.rec.preempted(task, [(p, v.res.job_id, v.res.tenant) for p, v in zip(made, evicted, strict=True)])
        # Keep what the beneficiary needs from being taken by lower tasks in this same cycle.
        self._hold(task, shape, picks, self.now, extra, record=True)
        node_type = self.cap.gpu_type[picks[0][0]] if shape.gpus else None
        self.quota.charge(task.tenant, node_type, shape.total_gpus, self.cap.cluster[picks[0][0]])
        self._took(task.tenant, shape, picks)
        self.fair.charge(task.tenant, node_type, shape.total_gpus, shape.cpus * shape.workers,
                         shape.mem * shape.workers)
        waiting = len(chosen[0]) - len(evicted)
        self.plan.reasons[task.task_id] = explain.preempting(len(evicted), sum(v.lost for v in evicted), waiting)
        return True

    def _frees_soon(self, shape: Shape, classes: Sequence[NodeClass]) -> bool:
        """_frees_soon tells whether expected ends free room for the shape within the reclaim patience."""
        patience = self.cfg.reclaim_patience_s
        if patience <= 0:
            return False
        if self.releases is None:
            self.releases = releases_of(self.cap)
        soon = [r for r in self.releases + self.placed if r[0] <= self.now + patience]
        return earliest_start(self.cap, shape, classes, soon, self.now) is not None

    # --- backfill holds -----------------------------------------------------------------------------

    def keep_promises(self) -> None:
        """keep_promises keeps a place among the held reservations for each gang held last cycle that still waits.

        Tasks ahead of the gang in line cannot take its place (they still go first on capacity,
        as their place in line says); at its turn the gang re-holds, before any task behind it.
        Nodes held for a preemption's beneficiary are kept for it outright (``_bind``).
        """
        waiting = {t.task_id: t for t in self.snap.pending} if self.snap.holds else {}
        for prior in self.snap.holds:
            task = waiting.get(prior.task_id)
            # No cap here: the cycle that made these holds kept within max_held_reservations.
            if task is None or task.task_id in self.promised or task.task_id in self.bound:
                continue
            shape, verdict = self._shape(task)
            nodes = {self.cap.index[n] for n in prior.nodes if n in self.cap.index}
            if prior.preempting:
                if verdict.reason is None and nodes:
                    self._bind(task, shape, verdict.classes, nodes)
                continue
            if shape.workers == 1 or verdict.reason is not None or not nodes:
                continue  # one-worker tasks fit into any gap and are held afresh each cycle
            if self.releases is None:
                self.releases = releases_of(self.cap)
            if earliest_start(self.cap, shape, verdict.classes, self.releases, self.now, only=nodes) is None:
                continue  # its nodes went down, or what runs there has no end: the hold lapses
            self.promised.add(task.task_id)
            self.holds_made += 1

    def _bind(self, task: PendingTask, shape: Shape, classes: Sequence[NodeClass], nodes: set[int]) -> None:
        """_bind keeps the nodes a preemption freed for its beneficiary until the beneficiary's turn.

        The victims lost their work to give the beneficiary these nodes. Were a task ahead of it
        in line free to take them (as it may take a backfill hold's), the beneficiary would have to
        preempt again, and when the task ahead is a victim whose tenant is back inside its guarantee
        the two evict each other for ever (a livelock; tests/sim/test_preemption_terminates.py).
        So until its turn, work ahead of it may use only what it leaves spare on them, as work
        behind a held start may. Kept only while the victims are gone or stopping (the start is now).
        """
        if self.releases is None:
            self.releases = releases_of(self.cap)
        found = earliest_start(self.cap, shape, classes, self.releases, self.now, only=nodes)
        if found is None or found.start > self.now:
            return  # a victim still runs (its preemption was not applied) or a node went: nothing to keep
        for i, _ in found.picks:
            self.cap.hold(i, found.start, found.spare[i], task.job_id)
        self.bound[task.task_id] = [i for i, _ in found.picks]
        self.labels[task.job_id] = explain.job_label(task)

    def _unbind(self, task_id: str) -> None:
        """_unbind hands the beneficiary its kept nodes at its turn (they never block their own task)."""
        self.unbound.add(task_id)
        for i in self.bound.pop(task_id):
            self.cap.hold_start[i] = self.cap.hold_spare[i] = self.cap.hold_job[i] = None
        # Capacity grew: what failed to fit, or found no victims, before may succeed now.
        self.failed.clear()
        self.diagnoses.clear()
        self.preempt_failed.clear()

    def _lift_promise(self, task_id: str) -> None:
        """_lift_promise hands a kept place to its gang at its turn: it re-holds even past the cap."""
        self.promised.discard(task_id)
        self.holds_made -= 1
        self.kept.add(task_id)

    def _try_hold(self, task: PendingTask, shape: Shape, classes: Sequence[NodeClass], reason: PendingReason) -> bool:
        """_try_hold reserves nodes at the earliest start for one of the first blocked tasks."""
        if self.holds_made >= self.cfg.max_held_reservations and task.task_id not in self.kept:
            return False
        big = shape.workers > 1 or shape.total_gpus >= self.cfg.hold_min_gpus
        if not big and not is_aged(task, self.now, self.cfg):
            return False
        self.holds_made += 1
        if self.releases is None:
            self.releases = releases_of(self.cap)
        found = earliest_start(self.cap, shape, classes, self.releases + self.placed, self.now)
        if found is None:
            return self._keep_from_gangs(task, shape, classes, reason)
        self._hold(task, shape, found.picks, found.start, found.spare, record=False)
        nodes = [self.cap.names[i] for i, _ in found.picks]
        self.plan.reasons[task.task_id] = explain.held(shape, found.start, self.now, nodes)
        if self.rec:
            self.rec.held(task, self.plan.held[-1], nodes, self.plan.reasons[task.task_id])
        return True

    def _hold(self, task: PendingTask, shape: Shape, picks: list[Pick], start: float,
              future: dict[int, list[float]], record: bool) -> None:
        """_hold marks picked nodes as held and records the HeldReservation."""
        cap = self.cap
        for i, count in picks:
            if record:
                # Preemption: spare = free now + what victims free - what the beneficiary takes.
                f = future[i]
                spare = [cap.gpu[i] + f[0] - count * shape.gpus, cap.cpu[i] + f[1] - count * shape.cpus,
                         cap.mem[i] + f[2] - count * shape.mem, cap.sto[i] + f[3] - count * shape.sto]
            else:
                spare = future[i]
            cap.hold(i, start, spare, task.job_id)
        self.labels[task.job_id] = explain.job_label(task)
        nodes = tuple(cap.names[i] for i, _ in picks)
        self.plan.held.append(HeldReservation(task.task_id, task.job_id, nodes, start, preempting=record))

    def _keep_from_gangs(
        self, task: PendingTask, shape: Shape, classes: Sequence[NodeClass], reason: PendingReason
    ) -> bool:
        """_keep_from_gangs keeps a no-start-time gang's nodes from other gangs so it cannot starve."""
        if shape.workers == 1:
            return False
        picks = nodes_when_all_end(self.cap, shape, classes)
        if not picks:
            return False
        for i, _ in picks:
            self.cap.gang_blocked[i] = task.job_id
        self.labels[task.job_id] = explain.job_label(task)
        self.plan.reasons[task.task_id] = explain.kept_from_gangs(reason, [self.cap.names[i] for i, _ in picks])
        if self.rec:
            self.rec.held(task, None, [self.cap.names[i] for i, _ in picks], self.plan.reasons[task.task_id])
        return True
