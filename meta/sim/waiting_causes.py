"""Why waiting jobs wait: shortage, fragmentation or policy, judged on free capacity after a decision.

Issue 23 asks whether jobs wait because GPUs are lacking or because free GPUs are in the wrong
shapes. After a decision, each task still waiting is judged against the cluster's free capacity:

* **shortage**: fewer GPUs of its type are free in the whole cluster than the task asks for
  (an any-type task counts the type with the most free GPUs: a task never mixes types);
* **fragmentation**: enough GPUs of its type are free in total, but no set of nodes holds its
  shape (GPUs, cpus and memory per worker; one switch when its topology requires it);
* **policy**: it would fit now, yet the policy held it (ordering, fair share, quota, nodes held
  for a gang — holds are ignored here — or the decision period).

Feasibility is the daemon's own model whatever policy ran: the filter chain
(``meta.policy.feasibility.evaluate``) and the placement search (``meta.policy.placement.fit``)
on a ``Capacity`` view of the free amounts, without holds. A task needing no GPU that does not fit
is counted as shortage (of cpus or memory). Stranded GPUs are ``meta.policy.fragmentation.report``
over the waiting tasks' shapes: free GPUs on nodes where no waiting worker shape fits.
"""

from __future__ import annotations

from collections.abc import Iterable, Mapping, Sequence
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any, ClassVar

from meta.model.nodes import NodeState
from meta.policy.capacity import Capacity
from meta.policy.feasibility import Verdict, evaluate
from meta.policy.inventory import Inventory, build_inventory
from meta.policy.placement import fit
from meta.policy.shape import Shape, shape_of
from meta.policy.snapshot import PendingTask

if TYPE_CHECKING:
    from meta.sim.engine import EngineResult

SHORTAGE, FRAGMENTATION, POLICY = "shortage", "fragmentation", "policy"
CAUSES = (SHORTAGE, FRAGMENTATION, POLICY)
ANY_TYPE = "any"  # the label of tasks that accept any GPU type
NEVER = float("inf")  # "ends never": fit ignores holds anyway, so no start time can matter
FreeAmounts = Mapping[str, Sequence[float]]  # node -> [cpus, memory MiB, GPUs] free (the engine's own lists)


def _flat_cost(gpu_type: str | None) -> float:
    """_flat_cost ranks every GPU type alike: whether a task fits does not depend on the order types are tried."""
    return 0.0


def empty_capacity(inv: Inventory) -> Capacity:
    """empty_capacity is the idle cluster of a private inventory (its ledger is that inventory's own)."""
    return Capacity(inv, ())


def view_of(empty: Capacity, free: FreeAmounts) -> Capacity:
    """view_of is ``empty`` with these free amounts and no holds; a node not in ``free`` is idle."""
    inv = empty.inv
    gpu, cpu, mem = list(inv.gpu), list(inv.cpu), list(inv.mem)
    for i, name in enumerate(inv.names):
        left = free.get(name)
        if left is not None:
            cpu[i], mem[i], gpu[i] = left[0], int(left[1]), int(left[2])
    return empty.with_free((gpu, cpu, mem, list(inv.sto)))


def free_view(nodes: Sequence[NodeState], free: FreeAmounts, switch_parent: Mapping[str, str] | None = None) -> Capacity:
    """free_view indexes the nodes afresh (never the policy's memoised inventory) and applies the free amounts."""
    return view_of(empty_capacity(build_inventory(tuple(nodes), switch_parent or {})), free)


class Classifier:
    """Classifier names the cause of waiting for tasks against one free-capacity view (one answer per shape)."""

    def __init__(self, cap: Capacity) -> None:
        self.cap = cap
        self.causes: dict[Shape, str] = {}

    def cause(self, task: PendingTask) -> str:
        """cause is why ``task`` waits over the next interval: shortage, fragmentation or policy."""
        return self.cause_of_shape(shape_of(task))

    def cause_of_shape(self, shape: Shape) -> str:
        """cause_of_shape is cause() for a task's shape, computed once per view."""
        found = self.causes.get(shape)
        if found is None:
            found = self.causes[shape] = self._judge(shape)
        return found

    def _judge(self, shape: Shape) -> str:
        """_judge applies the three definitions in order: shortage, then policy if it fits, else fragmentation."""
        verdict = self._verdict(shape)
        if verdict.reason is not None:
            return SHORTAGE  # no healthy node can host it now: the capacity it needs is missing
        if shape.gpus and free_of_type(self.cap, shape.gpu_type) < shape.total_gpus:
            return SHORTAGE
        if fit(self.cap, shape, verdict.classes, NEVER, _flat_cost, ignore_holds=True):
            return POLICY
        return FRAGMENTATION if shape.gpus else SHORTAGE

    def _verdict(self, shape: Shape) -> Verdict:
        """_verdict is the filter chain's answer, memoised on the (private) inventory like the scheduler's."""
        inv = self.cap.inv
        verdict = inv.verdicts.get(shape)
        if verdict is None:
            verdict = inv.verdicts[shape] = evaluate(shape, inv.classes, inv.names, inv.leaf)
        return verdict


def free_of_type(cap: Capacity, gpu_type: str | None) -> int:
    """free_of_type is the free GPUs of a type on schedulable nodes; any type: the best single type."""
    if gpu_type is not None:
        return cap.free_by_type.get(gpu_type, 0)
    return max(cap.free_by_type.values(), default=0)  # a task never mixes GPU types


def classify(nodes: Sequence[NodeState], free: FreeAmounts, waiting: Iterable[PendingTask],
             switch_parent: Mapping[str, str] | None = None) -> dict[str, str]:
    """classify maps each waiting task's id to why it waits, given every node's free amounts after a decision."""
    judge = Classifier(free_view(nodes, free, switch_parent))
    return {task.task_id: judge.cause(task) for task in waiting}


# --- the aggregate ---------------------------------------------------------------------------------


def _zeros() -> dict[str, float]:
    """_zeros is one counter per cause."""
    return dict.fromkeys(CAUSES, 0.0)


@dataclass(slots=True)
class CauseSeconds:
    """CauseSeconds is waiting per cause as GPU-seconds (job GPUs × wait) and job-seconds."""

    gpu_s: dict[str, float] = field(default_factory=_zeros)
    job_s: dict[str, float] = field(default_factory=_zeros)

    def add(self, cause: str, seconds: float, gpus: int) -> None:
        """add counts ``seconds`` of one job's waiting under ``cause``."""
        self.gpu_s[cause] += seconds * gpus
        self.job_s[cause] += seconds

    @property
    def total_gpu_s(self) -> float:
        """total_gpu_s is every cause's GPU-seconds together."""
        return sum(self.gpu_s.values())

    def share(self, cause: str) -> float:
        """share is the cause's fraction of the GPU-seconds waited (0 when nobody waited)."""
        total = self.total_gpu_s
        return self.gpu_s[cause] / total if total > 0 else 0.0

    def as_dict(self) -> dict[str, Any]:
        """as_dict is GPU-hours and job-hours per cause with totals, and each cause's share of the GPU-hours."""
        return {
            "gpu_hours": {c: round(self.gpu_s[c] / 3600, 4) for c in CAUSES} | {"total": round(self.total_gpu_s / 3600, 4)},
            "job_hours": {c: round(self.job_s[c] / 3600, 4) for c in CAUSES}
            | {"total": round(sum(self.job_s.values()) / 3600, 4)},
            "share": {c: round(self.share(c), 4) for c in CAUSES},
        }


@dataclass(slots=True)
class Stranded:
    """Stranded is the time-averaged count of free GPUs no waiting shape can use (fragmentation's point metric)."""

    mean: float = 0.0  # over the measured window (0 while nobody waits)
    mean_while_waiting: float = 0.0  # over the part of the window in which some job waited
    free_while_waiting: float = 0.0  # free GPUs, same part: what the stranded ones are out of
    window_s: float = 0.0
    waiting_s: float = 0.0

    def as_dict(self) -> dict[str, float]:
        """as_dict is the figures rounded for JSON."""
        return {"mean": round(self.mean, 3), "mean_while_waiting": round(self.mean_while_waiting, 3),
                "free_while_waiting": round(self.free_while_waiting, 3), "window_s": round(self.window_s, 1),
                "waiting_s": round(self.waiting_s, 1)}


@dataclass(slots=True)
class WaitingSplit:
    """WaitingSplit is how much of the measured jobs' waiting was shortage, fragmentation or policy."""

    overall: CauseSeconds = field(default_factory=CauseSeconds)
    by_tenant: dict[str, CauseSeconds] = field(default_factory=dict)
    by_gpu_type: dict[str, CauseSeconds] = field(default_factory=dict)
    stranded: Stranded = field(default_factory=Stranded)
    jobs: int = 0  # measured jobs that waited at all

    HEADERS: ClassVar[tuple[str, ...]] = ("waiting of", "GPU-h", SHORTAGE, FRAGMENTATION, POLICY)

    def as_dict(self) -> dict[str, Any]:
        """as_dict is the --json section: overall, per tenant, per GPU type and stranded GPUs."""
        return {
            "causes": list(CAUSES),
            "jobs_waited": self.jobs,
            "overall": self.overall.as_dict(),
            "by_tenant": {name: part.as_dict() for name, part in sorted(self.by_tenant.items())},
            "by_gpu_type": {name: part.as_dict() for name, part in sorted(self.by_gpu_type.items())},
            "stranded_gpus": self.stranded.as_dict(),
        }

    def rows(self) -> list[list[str]]:
        """rows is the table under HEADERS: overall, each tenant, each GPU type (when there are several)."""
        out = [_row("all jobs", self.overall)]
        out += [_row(f"tenant {name}", part) for name, part in _largest_first(self.by_tenant)]
        if len(self.by_gpu_type) > 1:
            out += [_row(f"type {name}", part) for name, part in _largest_first(self.by_gpu_type)]
        return out

    def stranded_line(self) -> str:
        """stranded_line is the fragmentation metric in one sentence."""
        s = self.stranded
        return (f"stranded GPUs (free, on nodes no waiting shape fits): {s.mean:.1f} on average over the window; "
                f"{s.mean_while_waiting:.1f} of {s.free_while_waiting:.1f} free while jobs waited "
                f"({s.waiting_s / 3600:.1f} h)")


def _largest_first(parts: dict[str, CauseSeconds]) -> list[tuple[str, CauseSeconds]]:
    """_largest_first orders groups by GPU-seconds waited, most first, then by name."""
    return sorted(parts.items(), key=lambda item: (-item[1].total_gpu_s, item[0]))


def _row(label: str, part: CauseSeconds) -> list[str]:
    """_row is one table row: total GPU-hours, then each cause's GPU-hours and share."""
    return [label, f"{part.total_gpu_s / 3600:.1f}",
            *(f"{part.gpu_s[c] / 3600:.1f} ({part.share(c):.0%})" for c in CAUSES)]


def waiting_split(result: EngineResult) -> WaitingSplit | None:
    """waiting_split is the run's split, None when it ran without ``SimConfig.waiting_causes``."""
    return result.waiting
