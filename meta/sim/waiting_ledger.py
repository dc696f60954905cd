"""The engine's waiting-cause ledger: each measured job's waiting, decision by decision, by cause.

After every decision instant the engine hands over its free amounts and its queue
(``observe``); each measured waiting job keeps the cause found there until the next decision
that finds another one, or until it is placed (``started``, at the decision). So a job's causes add
up to exactly its queue delay — less, with ``SimConfig.launch_delay_s``, the launch after each
placement, which is no cause (its capacity is held; the wait is Slurm's):

* the time from its arrival (or requeue) to the first decision that sees it waiting takes that
  decision's cause; a job placed by that very decision waited only for the decision, so policy;
* time refused by its tenant's submit limits (the API's admission, issue 16) is policy.

Only measured jobs count (warm-up jobs run but are not measured, as everywhere else); every
waiting job's shape counts for stranded GPUs. Stranded GPUs are time-weighted over the measured
window (over everything observed when the window is empty).
"""

from __future__ import annotations

from collections.abc import Mapping, Sequence

from meta.model.nodes import NodeState
from meta.policy.capacity import Capacity
from meta.policy.fragmentation import report
from meta.policy.inventory import build_inventory
from meta.policy.shape import Shape, shape_of
from meta.policy.snapshot import PendingTask
from meta.sim.job import SimJob
from meta.sim.waiting_causes import (
    ANY_TYPE,
    POLICY,
    CauseSeconds,
    Classifier,
    FreeAmounts,
    Stranded,
    WaitingSplit,
    empty_capacity,
    view_of,
)

Sample = tuple[float, int, int, bool]  # (time, stranded GPUs, free GPUs, anyone waiting)


class WaitingLedger:
    """WaitingLedger accumulates why the measured jobs waited, and the stranded GPUs, over one run."""

    def __init__(self, jobs: Sequence[SimJob], nodes: tuple[NodeState, ...], switch_parent: Mapping[str, str],
                 window: tuple[float, float]) -> None:
        self.jobs = jobs
        # a private index: the policy's memoised inventory (and its capacity ledger) is never touched
        self.empty = empty_capacity(build_inventory(nodes, switch_parent))
        lo, hi = window
        self.window = window if hi > lo else (float("-inf"), float("inf"))
        self.split = WaitingSplit()
        self.open: dict[int, tuple[str, float]] = {}  # job index -> (cause, since when it is counted)
        self.shapes: dict[int, tuple[PendingTask, Shape]] = {}
        self.version: int | None = None  # the engine's capacity version the view below was built at
        self.judge: Classifier | None = None
        self.shape_set: set[Shape] = set()
        self.fragments = (0, 0)  # (stranded, free) GPUs for shape_set at version
        self.last: Sample | None = None
        self.areas = [0.0, 0.0, 0.0, 0.0, 0.0]  # window s, stranded·s, waiting s, stranded·s waiting, free·s waiting
        self.waited: set[int] = set()

    def observe(self, now: float, free: FreeAmounts, pending: Mapping[int, PendingTask], version: int) -> None:
        """observe judges every job still waiting after the decision at ``now`` (``version`` names the free amounts)."""
        self._close(now)
        if not pending:
            self.last = (now, 0, 0, False)
            return
        judge = self._judge(free, version)
        shapes: set[Shape] = set()
        for index, task in pending.items():
            shape = self._shape(index, task)
            shapes.add(shape)
            job = self.jobs[index]
            if not job.measured:
                continue
            cause = judge.cause_of_shape(shape)
            held = self.open.get(index)
            if held is None:
                self._open(index, job, task, cause, now)
            elif held[0] != cause:
                self._add(job, held[0], now - held[1])
                self.open[index] = (cause, now)
        if shapes != self.shape_set:
            found = report(judge.cap, shapes)
            self.shape_set, self.fragments = shapes, (found.stranded_gpus, found.free_gpus)
        self.last = (now, self.fragments[0], self.fragments[1], True)

    def started(self, index: int, job: SimJob, now: float) -> None:
        """started closes a job's waiting spell as it starts at ``now`` (its ``pending_since`` still set)."""
        self.shapes.pop(index, None)
        if not job.measured:
            return
        held = self.open.pop(index, None)
        if held is not None:
            self._add(job, held[0], now - held[1])
        else:  # placed by the first decision that saw it: it waited for that decision only
            self._add(job, POLICY, now - job.pending_since)

    def finish(self, end: float) -> WaitingSplit:
        """finish closes what is still open at ``end`` and returns the run's split."""
        self._close(end)
        for index, (cause, since) in self.open.items():
            self._add(self.jobs[index], cause, max(0.0, end - since))
        self.open.clear()
        span, stranded, waiting, stranded_waiting, free_waiting = self.areas
        self.split.stranded = Stranded(
            mean=stranded / span if span else 0.0,
            mean_while_waiting=stranded_waiting / waiting if waiting else 0.0,
            free_while_waiting=free_waiting / waiting if waiting else 0.0,
            window_s=span, waiting_s=waiting,
        )
        self.split.jobs = len(self.waited)
        return self.split

    # --- inside ----------------------------------------------------------------------------------

    def _judge(self, free: FreeAmounts, version: int) -> Classifier:
        """_judge is the classifier of the current free amounts, rebuilt only when capacity changed."""
        if self.judge is None or version != self.version:
            cap: Capacity = view_of(self.empty, free)
            self.judge, self.version = Classifier(cap), version
            self.shape_set = set()  # the stranded count depends on the free amounts too
        return self.judge

    def _shape(self, index: int, task: PendingTask) -> Shape:
        """_shape is the task's shape, kept while the job's task object is the same one."""
        kept = self.shapes.get(index)
        if kept is None or kept[0] is not task:
            kept = self.shapes[index] = (task, shape_of(task))
        return kept[1]

    def _open(self, index: int, job: SimJob, task: PendingTask, cause: str, now: float) -> None:
        """_open starts counting a waiting spell: submit-limit refusals as policy, the rest as ``cause``."""
        admitted = min(max(job.pending_since, task.submit_time), now)  # a refused client's task is stamped later
        self._add(job, POLICY, admitted - job.pending_since)
        self._add(job, cause, now - admitted)
        self.open[index] = (cause, now)

    def _add(self, job: SimJob, cause: str, seconds: float) -> None:
        """_add counts one job's seconds under a cause: overall, for its tenant and for its GPU type."""
        if seconds <= 0:
            return
        split, gpus = self.split, job.gpus
        tenant, gpu_type = job.trace.tenant, job.trace.gpu_type or ANY_TYPE
        split.overall.add(cause, seconds, gpus)
        split.by_tenant.setdefault(tenant, CauseSeconds()).add(cause, seconds, gpus)
        split.by_gpu_type.setdefault(gpu_type, CauseSeconds()).add(cause, seconds, gpus)
        self.waited.add(id(job))

    def _close(self, now: float) -> None:
        """_close time-weights the last sample up to ``now``, inside the window."""
        if self.last is None:
            return
        at, stranded, free, waiting = self.last
        lo, hi = self.window
        length = min(now, hi) - max(at, lo)
        if length <= 0:
            return
        areas = self.areas
        areas[0] += length
        areas[1] += stranded * length
        if waiting:
            areas[2] += length
            areas[3] += stranded * length
            areas[4] += free * length
