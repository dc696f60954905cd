"""The reports of ``plan what-if`` and ``plan need`` for people: one table of figures, then what each run assumed."""

from __future__ import annotations

from typing import Any

from cli.output import table
from cli.plan_group import duration
from meta.plan.calibrate import Calibration, Pair
from meta.plan.history import HistoryExport
from meta.plan.need import Goal, Need, Search
from meta.plan.what_if import Comparison, Delay, Figures


def what_if_text(result: Comparison, export: HistoryExport, context: dict[str, Any]) -> str:
    """what_if_text is the side-by-side table (today, its calibration error, each scenario and its delta) and notes."""
    runs = [result.today] + [outcome.figures for outcome in result.outcomes]
    headers = ["figure", "today", "calib. error"]
    for outcome in result.outcomes:
        headers += [outcome.scenario.name, "Δ"]
    rows = [_row(label, runs, cells, calib) for label, cells, calib in _lines(result, runs)]
    lines = [_head(result.calibration, export, context), "", table(headers, rows), ""]
    for outcome in result.outcomes:
        lines.append(f"{outcome.scenario.name}: {' '.join(outcome.scenario.changes())}")
        if outcome.applied.trend:
            lines.append(f"  {outcome.applied.trend.explain()}")
        lines += [f"  {note}" for note in outcome.applied.notes]
        if outcome.figures.unplaced > result.today.unplaced:
            lines.append(f"  {_count(outcome.figures.unplaced, 'row')} never ran (no node of its cluster fits "
                         "them): left out of its delays")
        if outcome.figures.invalid_placements:
            lines.append(f"  {outcome.figures.invalid_placements} placements could not be applied (dropped)")
    lines += ["calib. error: today's replay against the record, (simulated − recorded) / recorded; "
              "Δ: scenario − today (relative for delays)",
              "stranded GPUs: mean free GPUs while a job waited (share of the time some job waited); largest gang: "
              "GPUs of one type one job can get under one top switch",
              f"verdict on today's replay: {result.calibration.verdict()}"]
    notes = result.calibration.notes + result.notes
    return "\n".join(lines + [f"  - {note}" for note in notes])


def _lines(result: Comparison, runs: list[Figures]) -> list[tuple[str, Any, str]]:
    """_lines is each table line: its label, how to print and compare one run's figure, and its calibration error."""
    cal = result.calibration
    fits = {fit.tenant: fit for fit in cal.tenants}
    tenants = sorted({tenant for run in runs for tenant in run.tenants})
    found: list[tuple[str, Any, str]] = []
    for tenant in tenants:
        fit = fits.get(tenant)
        found.append((f"{tenant} mean delay", _delay(lambda f, t=tenant: _tenant(f, t, "mean")),
                      _error(fit.mean) if fit else "n/a"))
        found.append((f"{tenant} p95 delay", _delay(lambda f, t=tenant: _tenant(f, t, "p95")),
                      _error(fit.p95) if fit else "n/a"))
    found += [
        ("overall mean delay", _delay(lambda f: f.overall.mean), _error(cal.mean)),
        ("overall p95 delay", _delay(lambda f: f.overall.p95), _error(cal.p95)),
        ("rows replayed", (lambda f: f"{f.overall.jobs}/{f.rows}", lambda a, b: f"{b.overall.jobs - a.overall.jobs:+d}"),
         ""),
        ("GPUs (nodes)", (lambda f: f"{f.capacity_gpus} ({f.nodes})", lambda a, b: f"{b.capacity_gpus - a.capacity_gpus:+d}"),
         ""),
        ("GPU utilization", (lambda f: f"{f.utilization:.1%}", lambda a, b: f"{(b.utilization - a.utilization) * 100:+.1f} pt"),
         _error(cal.utilization)),
        ("stranded GPUs", (lambda f: f"{f.stranded_gpus:.1f} ({f.waiting_share:.0%})",
                           lambda a, b: f"{b.stranded_gpus - a.stranded_gpus:+.1f}"), ""),
    ]
    for gpu_type in sorted({t for run in runs for t in run.largest_gang}):
        found.append((f"largest gang {gpu_type}",
                      (lambda f, t=gpu_type: str(f.largest_gang.get(t, 0)),
                       lambda a, b, t=gpu_type: f"{b.largest_gang.get(t, 0) - a.largest_gang.get(t, 0):+d}"), ""))
    return found


def _row(label: str, runs: list[Figures], cells: Any, calib: str) -> list[str]:
    """_row is one table line: today's cell, its calibration error, then each scenario's cell and delta."""
    show, compare = cells
    today = runs[0]
    row = [label, show(today), calib]
    for other in runs[1:]:
        row += [show(other), compare(today, other)]
    return row


def _tenant(found: Figures, tenant: str, stat: str) -> float | None:
    """_tenant is a tenant's mean or p95 delay in a run (None: no placed row of it there)."""
    delay: Delay | None = found.tenants.get(tenant)
    if delay is None:
        return None
    return delay.mean if stat == "mean" else delay.p95


def _delay(value: Any) -> tuple[Any, Any]:
    """_delay prints a delay figure and its delta: relative to today's, absolute when today's is 0."""

    def show(found: Figures) -> str:
        """show prints the figure of one run."""
        got = value(found)
        return "-" if got is None else duration(got)

    def compare(today: Figures, other: Figures) -> str:
        """compare prints the figure's change from today's."""
        before, after = value(today), value(other)
        if before is None or after is None:
            return "-"
        if before == 0:
            return "+0" if after == 0 else "+" + duration(after)
        return f"{(after - before) / before:+.0%}"

    return show, compare


def _error(pair: Pair) -> str:
    """_error prints a figure's calibration error as a signed percentage, ``n/a`` without one."""
    error = pair.error
    return "n/a" if error is None else f"{error:+.0%}"


def _head(calibration: Calibration, export: HistoryExport, context: dict[str, Any]) -> str:
    """_head is the first line: the rows, the window, the cluster, the policy and the period."""
    return (f"{calibration.rows} rows ({calibration.censored} censored) of {export.jobs} jobs submitted "
            f"{export.since:%Y-%m-%dT%H:%M:%SZ} – {export.until:%Y-%m-%dT%H:%M:%SZ}; cluster: {context['cluster']}; "
            f"policy: {context['policy']}; period {context['period_s']:g} s; launch {context['launch_delay_s']:.2f} s")


# --- need -----------------------------------------------------------------------------------------------------------


def need_text(result: Need, export: HistoryExport, context: dict[str, Any]) -> str:
    """need_text is the goals, today's figures, each offered type's answer, the simulations run and the verdict."""
    today = [(goal, goal.value(result.today)) for goal in result.goals]
    lines = [_head(result.calibration, export, context),
             "goals: " + "; ".join(_goal(goal) for goal in result.goals),
             "today's replay: " + "; ".join(_figure(goal, value) for goal, value in today)]
    lines += [_search_line(result, search) for search in result.searches]
    best = result.best
    if best is not None:
        answer = ("today's cluster meets every goal: no node needed" if best.found == 0
                  else f"add {best.found} {best.gpu_type}:{best.gpus} node{'s' if best.found != 1 else ''}")
        lines.append(f"answer: {answer}")
    lines += [f"simulations: {result.simulations} (today's replay included); the search assumes more nodes never "
              "lengthen a wait and checks one node fewer",
              f"verdict on today's replay: {result.calibration.verdict()}"]
    return "\n".join(lines)


def none_met(result: Need) -> str:
    """none_met is the one-line refusal when no searched count meets every goal."""
    offered = ", ".join(f"{s.gpu_type}:{s.gpus}" for s in result.searches)
    most = max(s.max_nodes for s in result.searches)
    worst = result.searches[0]
    probe = worst.probe(worst.max_nodes)
    shown = ""
    if probe is not None:
        shown = f"; with {worst.max_nodes}: " + ", ".join(_figure(g, v) for g, v in zip(result.goals, probe.values,
                                                                                          strict=True))
    return (f"no count of up to {most} added nodes ({offered}) meets every goal in simulation "
            f"({_count(result.simulations, 'simulation')}{shown})")


def _search_line(result: Need, search: Search) -> str:
    """_search_line is one offered type's outcome: the count found and the one below it, or none."""
    tried = ", ".join(str(p.nodes) for p in search.probes if p.nodes > 0) or "none"
    tail = f"; tried {tried} ({_count(search.simulations, 'simulation')})"
    if search.found is None:
        return f"{search.gpu_type}:{search.gpus}: no count up to {search.max_nodes} meets every goal{tail}"
    if search.found == 0:
        return f"{search.gpu_type}:{search.gpus}: today's cluster meets every goal{tail}"
    hit = search.probe(search.found)
    values = ", ".join(_figure(g, v) for g, v in zip(result.goals, hit.values if hit else (), strict=False))
    fewer = search.found - 1
    return (f"{search.gpu_type}:{search.gpus}: {_count(search.found, 'node')} meet{'s' if search.found == 1 else ''} "
            f"every goal ({values}); {_count(fewer, 'node')} do{'es' if fewer == 1 else ''} not{tail}")


def _count(n: int, noun: str) -> str:
    """_count is ``n noun`` with the plural when n is not 1."""
    return f"{n} {noun}{'' if n == 1 else 's'}"


def _goal(goal: Goal) -> str:
    """_goal prints a goal as written (``tenant-a p95 ≤ 1.0 h``)."""
    return f"{goal.tenant} {goal.stat} ≤ {duration(goal.limit_s)}"


def _figure(goal: Goal, value: float | None) -> str:
    """_figure prints a goal's figure in a run and whether it holds."""
    if value is None:
        return f"{goal.tenant} {goal.stat}: no placed row, not met"
    return f"{goal.tenant} {goal.stat} {duration(value)}, {'met' if value <= goal.limit_s else 'not met'}"
