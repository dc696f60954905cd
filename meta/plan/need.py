"""Need: the fewest added nodes of an offered type whose replay meets every queue-delay goal.

Rules (``metasched plan need`` prints them):

* **Goals** are ``TENANT<=DURATION`` on the simulated mean or p95 queue delay of that tenant's
  rows (``*`` = all rows); a goal holds when the figure is at most the bound.
* **Search**, per offered node type: today's replay (0 nodes) first; then 1, 2, 4, … nodes (capped
  at ``max_nodes``) until one count meets every goal; then a binary search between the last count
  that failed and it. It assumes more nodes never lengthen a wait (true of the policy in the
  large, not in every schedule); the answer is always a count that meets every goal next to one
  less that was simulated and does not.
* Several offered types are searched one by one; the answer is the type needing the fewest nodes
  (the first offered on a tie).
* Every replay, today's and each probe's, simulates the same launch delay (decision → start): the
  window's measured one unless one is given.
"""

from __future__ import annotations

import re
from collections.abc import Callable, Sequence
from dataclasses import dataclass, field
from typing import Any

from meta.model.durations import parse_duration_s
from meta.model.errors import InvalidRequest
from meta.plan.calibrate import MIN_JOBS, Calibration, compare, launch_delay
from meta.plan.history import HistoryExport
from meta.plan.scenario import (
    ALL,
    MAX_GPUS_PER_NODE,
    MAX_NODES,
    Inputs,
    NodeChange,
    Scenario,
    apply_scenario,
    gpu_type_of,
)
from meta.plan.what_if import Figures, figures, run_inputs

MAX_GOALS = 32
MAX_TYPES = 8
MAX_GOAL_S = 366 * 86400.0
STATS = ("mean", "p95")
_GOAL = re.compile(r"\s*([^<=\s]{1,100})\s*<=\s*(\S.{0,39})")
_TYPE = re.compile(r"\s*([A-Za-z0-9][A-Za-z0-9_.-]{0,39})\s*:\s*([0-9]{1,6})\s*")


@dataclass(frozen=True, slots=True)
class Goal:
    """Goal is a bound on one tenant's (or every row's, ``*``) simulated mean or p95 queue delay."""

    tenant: str
    stat: str  # "mean" or "p95"
    limit_s: float

    def label(self) -> str:
        """label is the goal as written on the command line, the bound in seconds."""
        return f"{self.tenant} {self.stat} <= {self.limit_s:g} s"

    def value(self, found: Figures) -> float | None:
        """value is the goal's figure in a replay (None: the tenant has no placed row there)."""
        delay = found.overall if self.tenant == ALL else found.tenants.get(self.tenant)
        if delay is None or delay.jobs == 0:
            return None
        return delay.mean if self.stat == "mean" else delay.p95

    def met(self, found: Figures) -> bool:
        """met tells whether the replay meets the goal (a tenant without a placed row does not)."""
        value = self.value(found)
        return value is not None and value <= self.limit_s


@dataclass(frozen=True, slots=True)
class Probe:
    """Probe is one simulated count of added nodes and the goals' figures in it."""

    nodes: int
    met: bool
    values: tuple[float | None, ...]  # one per goal, in the goals' order


@dataclass
class Search:
    """Search is one offered node type's probes and the fewest nodes that met every goal (None: none did)."""

    gpu_type: str
    gpus: int
    max_nodes: int
    probes: list[Probe] = field(default_factory=list)
    found: int | None = None

    @property
    def simulations(self) -> int:
        """simulations counts the replays this search ran (today's is shared and not counted)."""
        return sum(1 for probe in self.probes if probe.nodes > 0)

    def probe(self, nodes: int) -> Probe | None:
        """probe is the probe of ``nodes`` added nodes (None when not simulated)."""
        return next((p for p in self.probes if p.nodes == nodes), None)

    def as_dict(self) -> dict[str, Any]:
        """as_dict is the search for --json."""
        return {"node_type": f"{self.gpu_type}:{self.gpus}", "max_nodes": self.max_nodes, "found": self.found,
                "simulations": self.simulations,
                "probes": [{"nodes": p.nodes, "met": p.met, "values_s": [_round(v) for v in p.values]}
                           for p in self.probes]}


@dataclass
class Need:
    """Need is the goals, today's calibration and figures, and each offered type's search."""

    goals: list[Goal]
    calibration: Calibration
    today: Figures
    searches: list[Search]

    @property
    def best(self) -> Search | None:
        """best is the search that met the goals with the fewest nodes (the first offered on a tie)."""
        met = [search for search in self.searches if search.found is not None]
        return min(met, key=lambda s: s.found or 0) if met else None

    @property
    def simulations(self) -> int:
        """simulations counts every replay run, today's included."""
        return 1 + sum(search.simulations for search in self.searches)

    def as_dict(self) -> dict[str, Any]:
        """as_dict is the --json report."""
        best = self.best
        return {
            "goals": [{"tenant": g.tenant, "stat": g.stat, "limit_s": g.limit_s} for g in self.goals],
            "today": {"values_s": [_round(g.value(self.today)) for g in self.goals],
                      "met": all(g.met(self.today) for g in self.goals)},
            "answer": None if best is None else {"node_type": f"{best.gpu_type}:{best.gpus}", "nodes": best.found},
            "searches": [search.as_dict() for search in self.searches],
            "simulations": self.simulations,
            "calibration": {"verdict": self.calibration.verdict(), "mean_queue_s": self.calibration.mean.as_dict(),
                            "p95_queue_s": self.calibration.p95.as_dict(),
                            "launch_delay_s": round(self.calibration.launch_delay_s, 3)},
        }


def parse_goal(stat: str, text: str) -> Goal:
    """parse_goal reads ``TENANT<=DURATION`` (``tenant-a<=1h``) for the mean or the p95."""
    option = f"--{stat}"
    match = _GOAL.fullmatch(text)
    if not match:
        raise InvalidRequest(f"{option} {text!r}: expected TENANT<=DURATION, e.g. tenant-a<=1h (or *<=30m)")
    try:
        limit = parse_duration_s(match.group(2).strip())
    except ValueError as exc:
        raise InvalidRequest(f"{option} {text!r}: {exc}") from None
    if not 0 < limit <= MAX_GOAL_S:
        raise InvalidRequest(f"{option} {text!r}: the bound must be above 0 and at most 366 days")
    return Goal(match.group(1), stat, limit)


def parse_node_type(text: str) -> tuple[str, int]:
    """parse_node_type reads ``TYPE:GPUS`` (``h100:8``: nodes of 8 h100 GPUs)."""
    match = _TYPE.fullmatch(text)
    if not match:
        raise InvalidRequest(f"--node-type {text!r}: expected TYPE:GPUS, e.g. h100:8 (nodes of 8 h100 GPUs)")
    gpus = int(match.group(2))
    if not 1 <= gpus <= MAX_GPUS_PER_NODE:
        raise InvalidRequest(f"--node-type {text!r}: GPUs per node must be from 1 to {MAX_GPUS_PER_NODE}")
    return match.group(1), gpus


def need(export: HistoryExport, base: Inputs, goals: Sequence[Goal], node_types: Sequence[tuple[str, int]],
         max_nodes: int, period_s: float, *, policy: Callable[..., Any] | None = None,
         min_jobs: int = MIN_JOBS, launch_delay_s: float | None = None) -> Need:
    """need searches, per offered node type, the fewest added nodes meeting every goal (module docstring).

    ``launch_delay_s`` (None: the export's measured one) is decision → start in every replay.
    """
    _check(base, goals, node_types, max_nodes)
    launch = launch_delay(export, launch_delay_s)
    today_run = run_inputs(base, period_s, policy=policy, launch_delay_s=launch)
    today = figures("today", today_run, base.cluster)
    result = Need(list(goals), compare(export, today_run, min_jobs), today, [])
    for gpu_type, gpus in node_types:
        search = Search(gpu_type, gpus, max_nodes)

        def probe(nodes: int, search: Search = search) -> bool:
            """probe simulates ``nodes`` added nodes of the search's type once and tells whether every goal holds."""
            found = search.probe(nodes)
            if found is None:
                if nodes == 0:
                    outcome = today
                else:
                    change = NodeChange(search.gpu_type, nodes, search.gpus)
                    applied = apply_scenario(Scenario(f"+{nodes}", add_nodes=(change,)), base)
                    run = run_inputs(applied.inputs, period_s, policy=policy, origin=today_run.origin,
                                     launch_delay_s=launch)
                    outcome = figures(f"+{nodes}", run, applied.inputs.cluster)
                found = Probe(nodes, all(g.met(outcome) for g in goals), tuple(g.value(outcome) for g in goals))
                search.probes.append(found)
            return found.met

        search.found = fewest(probe, max_nodes)
        result.searches.append(search)
    return result


def fewest(met: Callable[[int], bool], most: int) -> int | None:
    """fewest is the least n in 0..most with met(n) by doubling then bisection, assuming met is monotone."""
    if met(0):
        return 0
    failed, step = 0, 1
    while True:
        tried = min(step, most)
        if met(tried):
            break
        if tried == most:
            return None
        failed, step = tried, step * 2
    while tried - failed > 1:  # failed does not meet, tried does
        middle = (failed + tried) // 2
        if met(middle):
            tried = middle
        else:
            failed = middle
    return tried


def _check(base: Inputs, goals: Sequence[Goal], node_types: Sequence[tuple[str, int]], max_nodes: int) -> None:
    """_check refuses empty or oversized goals and offers, tenants without rows and types the site lacks."""
    if not goals:
        raise InvalidRequest("give at least one goal: --p95 TENANT<=DURATION or --mean TENANT<=DURATION")
    if len(goals) > MAX_GOALS or len(node_types) > MAX_TYPES:
        raise InvalidRequest(f"at most {MAX_GOALS} goals and {MAX_TYPES} --node-type")
    if not node_types:
        raise InvalidRequest("give at least one --node-type TYPE:GPUS, e.g. h100:8")
    if not 1 <= max_nodes <= MAX_NODES:
        raise InvalidRequest(f"--max-nodes must be from 1 to {MAX_NODES:,}")
    tenants = {row.tenant for row in base.rows}
    for goal in goals:
        if goal.tenant != ALL and goal.tenant not in tenants:
            listed = ", ".join(sorted(tenants)[:20]) or "none"
            raise InvalidRequest(f"--{goal.stat} {goal.tenant}: the tenant has no rows in the window (known: {listed})")
    present = sorted({gpu_type_of(g) for g in base.cluster.node_groups if g.count and g.gpus})
    for gpu_type, gpus in node_types:
        if gpu_type not in present:  # new nodes copy the shape of the site's nodes of their type
            raise InvalidRequest(f"--node-type {gpu_type}:{gpus}: the cluster has no {gpu_type} node to copy cpus, "
                                 f"memory, switch and partitions from (types: {', '.join(present) or 'none'})")
        apply_scenario(Scenario("check", add_nodes=(NodeChange(gpu_type, max_nodes, gpus),)), base)  # in bounds


def _round(value: float | None) -> float | None:
    """_round rounds a figure for JSON."""
    return None if value is None else round(value, 3)
