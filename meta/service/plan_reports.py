"""Saved capacity-planning reports as each caller may see them (``plan reports``, ``plan report``, the web's Capacity page).

Who sees what:

- **admins** (Slurm AdminLevel Operator/Administrator, root): every report whole — every tenant's
  rows, the overall figures, the notes, the verdict, every plot, and the report as ``--json`` printed it;
- a **coordinator** of tenant T (Slurm's coordinator of the account): every report, but only T's
  per-tenant rows (of every tenant it coordinates, within ``--tenant``), the cluster-wide GPU
  utilization, stranded GPUs and capacity, and the plots of cluster-wide figures only (utilization;
  the queue-delay plot has a panel per tenant). Overall delays, job counts, notes and verdicts are
  left out: they reveal the other tenants' load. A scenario's changes to other tenants (their
  share or demand) and its policy file are left out too;
- anyone else: refused (403), as the admin page is.

Every view is built from the stored report by naming the fields it keeps (never by deleting the
ones it hides), so a field a later report gains stays an admin's until it is added here.
"""

from __future__ import annotations

import base64
from collections.abc import Iterable, Mapping
from typing import Any

from meta.model.errors import Forbidden, InvalidRequest
from meta.store import plan_reports
from meta.store.db import Database
from meta.store.plan_reports import KINDS, SavedReport
from tenants.identity import Principal

Scope = frozenset[str] | None  # None: every tenant (an admin)
REFUSED = ("saved plan reports are for admins and tenants' coordinators (a coordinator sees its own tenant's rows); "
           "ask your tenant's coordinator or an admin")
ANY_TENANT = "*"


def scope_of(principal: Principal) -> Scope:
    """scope_of is whose per-tenant rows the caller sees: None for an admin, its coordinated tenants, else Forbidden."""
    if principal.is_admin:
        return None
    mine = frozenset(tenant for tenant in principal.coordinates if principal.may_coordinate(tenant))
    if not mine:
        raise Forbidden(REFUSED)
    return mine


def audiences(scope: Scope) -> tuple[str, ...]:
    """audiences is which plots the scope may see."""
    return plan_reports.AUDIENCES if scope is None else ("cluster",)


def listing(db: Database, principal: Principal, *, kind: str | None = None, limit: int = 50) -> list[dict[str, Any]]:
    """listing is the saved reports newest first (heads: id, kind, name, when, the plots the caller may see)."""
    scope = scope_of(principal)
    if kind is not None and kind not in KINDS:
        raise InvalidRequest(f"kind must be one of {', '.join(KINDS)}")
    if not 1 <= limit <= plan_reports.MAX_LIST:
        raise InvalidRequest(f"limit must be 1 to {plan_reports.MAX_LIST}")
    with db.session() as session:
        found = plan_reports.heads(session, kind=kind, limit=limit)
    return [_head(saved, scope) for saved in found]


def one(db: Database, principal: Principal, report_id: int, *, plots: bool = False) -> dict[str, Any]:
    """one is a saved report as the caller may see it (its PNGs base64-encoded when ``plots``)."""
    scope = scope_of(principal)
    with db.session() as session:
        saved = plan_reports.load(session, report_id, audiences=audiences(scope), with_plots=plots)
    return view(saved, scope, plots=plots)


def latest(db: Database, principal: Principal, counts: Mapping[str, int], *, plots: bool = True) -> list[dict[str, Any]]:
    """latest is the newest ``counts[kind]`` reports of each kind, whole as the caller may see them (the Capacity page)."""
    scope = scope_of(principal)
    found: list[dict[str, Any]] = []
    with db.session() as session:
        for kind, count in counts.items():
            for head in plan_reports.heads(session, kind=kind, limit=count):
                saved = plan_reports.load(session, head.id, audiences=audiences(scope), with_plots=plots)
                found.append(view(saved, scope, plots=plots))
    return found


def _head(saved: SavedReport, scope: Scope) -> dict[str, Any]:
    """_head is a report's listing line."""
    head: dict[str, Any] = {
        "id": saved.id, "kind": saved.kind, "name": saved.name, "saved_at": saved.created_at.isoformat(),
        "plots": [plot.name for plot in saved.plots if plot.audience in audiences(scope)],
        "scope": "all" if scope is None else sorted(scope),
    }
    if scope is None:
        head["saved_by"] = saved.created_by
        head["report_bytes"] = saved.report_bytes
    return head


def view(saved: SavedReport, scope: Scope, *, plots: bool = False) -> dict[str, Any]:
    """view is one report for ``scope``: its head, context, figures and plots; an admin's holds the stored report too."""
    report = saved.report or {}
    found = _head(saved, scope)
    found["context"] = _context(report, scope)
    found["figures"] = figures(saved.kind, report, scope)
    found["plots"] = [_plot(plot, plots) for plot in saved.plots if plot.audience in audiences(scope)]
    if scope is None:
        found["report"] = report
    return found


def _plot(plot: plan_reports.Plot, with_bytes: bool) -> dict[str, Any]:
    shown: dict[str, Any] = {"name": plot.name, "audience": plot.audience}
    if with_bytes:
        shown["png_base64"] = base64.b64encode(plot.png).decode("ascii")
    return shown


def _context(report: dict[str, Any], scope: Scope) -> dict[str, Any]:
    """_context is what the replay ran on: window, cluster, period, launch delay (and for admins the policy and job count)."""
    keys = ("window", "cluster", "period_s", "launch_delay_s") + (("policy", "jobs") if scope is None else ())
    return {key: report[key] for key in keys if key in report}


def _sees(scope: Scope, tenant: str) -> bool:
    return scope is None or tenant in scope


def _num(value: Any) -> float | None:
    return value if isinstance(value, int | float) and not isinstance(value, bool) else None


def _pair(found: Any, key: str) -> Any:
    return found.get(key) if isinstance(found, dict) else None


def figures(kind: str, report: dict[str, Any], scope: Scope) -> dict[str, Any]:
    """figures is the report's figures table in one shape for every kind, with only ``scope``'s tenant rows.

    ``runs`` names the columns; each tenant row has, per run, its jobs and mean and p95 queue delay (s),
    and today's calibration error (relative: (simulated − recorded) / recorded). Cluster-wide rows:
    GPU utilization, stranded GPUs, capacity. Admins also get ``overall`` (every job's delays) and the verdict.
    """
    if kind == "calibrate":
        found = _calibrate(report, scope)
    elif kind == "what-if":
        found = _what_if(report, scope)
    else:
        found = _need(report, scope)
    return found


def _calibrate(report: dict[str, Any], scope: Scope) -> dict[str, Any]:
    rows = []
    for fit in report.get("tenants") or []:
        if not isinstance(fit, dict) or not _sees(scope, str(fit.get("tenant"))):
            continue
        mean, p95 = fit.get("mean_queue_s") or {}, fit.get("p95_queue_s") or {}
        rows.append({"tenant": fit.get("tenant"), "jobs": [fit.get("jobs"), fit.get("jobs")],
                     "mean_s": [_num(_pair(mean, "real")), _num(_pair(mean, "sim"))],
                     "p95_s": [_num(_pair(p95, "real")), _num(_pair(p95, "sim"))],
                     "mean_error": _num(_pair(mean, "error")), "p95_error": _num(_pair(p95, "error"))})
    busy = report.get("gpu_utilization") or {}
    waiting = report.get("waiting") or {}
    stranded = _num(_pair(waiting.get("stranded_gpus") if isinstance(waiting, dict) else None, "mean"))
    capacity = _num(report.get("capacity_gpus"))
    found: dict[str, Any] = {
        "runs": ["recorded", "simulated"], "tenants": rows,
        "gpu_utilization": [_num(_pair(busy, "real")), _num(_pair(busy, "sim"))],
        "utilization_error": _num(_pair(busy, "error")),
        "stranded_gpus": [None, stranded], "capacity_gpus": [capacity, capacity],
    }
    if scope is None:
        overall = report.get("overall") or {}
        mean, p95 = overall.get("mean_queue_s") or {}, overall.get("p95_queue_s") or {}
        found["overall"] = {"jobs": [report.get("replayed"), report.get("replayed")],
                            "mean_s": [_num(_pair(mean, "real")), _num(_pair(mean, "sim"))],
                            "p95_s": [_num(_pair(p95, "real")), _num(_pair(p95, "sim"))],
                            "mean_error": _num(_pair(mean, "error")), "p95_error": _num(_pair(p95, "error"))}
        found["verdict"] = report.get("verdict")
        found["notes"] = list(report.get("notes") or [])
    return found


def _what_if(report: dict[str, Any], scope: Scope) -> dict[str, Any]:
    today = report.get("today") or {}
    scenarios = [s for s in report.get("scenarios") or [] if isinstance(s, dict)]
    runs = [today] + [s.get("figures") or {} for s in scenarios]
    calibration = report.get("calibration") or {}
    fits = {fit.get("tenant"): fit for fit in calibration.get("tenants") or [] if isinstance(fit, dict)}
    tenants = sorted({str(t) for run in runs for t in (run.get("tenants") or {})})
    rows = []
    for tenant in tenants:
        if not _sees(scope, tenant):
            continue
        delays = [(run.get("tenants") or {}).get(tenant) or {} for run in runs]
        fit = fits.get(tenant) or {}
        rows.append({"tenant": tenant, "jobs": [_num(d.get("jobs")) for d in delays],
                     "mean_s": [_num(d.get("mean_queue_s")) for d in delays],
                     "p95_s": [_num(d.get("p95_queue_s")) for d in delays],
                     "mean_error": _num(_pair(fit.get("mean_queue_s"), "error")),
                     "p95_error": _num(_pair(fit.get("p95_queue_s"), "error"))})
    found: dict[str, Any] = {
        "runs": ["today"] + [str(_pair(s.get("scenario"), "name") or (s.get("figures") or {}).get("name") or "?")
                             for s in scenarios],
        "tenants": rows,
        "gpu_utilization": [_num(run.get("gpu_utilization")) for run in runs],
        "utilization_error": _num(_pair(calibration.get("gpu_utilization"), "error")),
        "stranded_gpus": [_num(run.get("stranded_gpus")) for run in runs],
        "capacity_gpus": [_num(run.get("capacity_gpus")) for run in runs],
        "changes": [_changes(s.get("changes") or [], scope) for s in scenarios],
    }
    if scope is None:
        overall = [run.get("overall") or {} for run in runs]
        found["overall"] = {"jobs": [_num(o.get("jobs")) for o in overall],
                            "mean_s": [_num(o.get("mean_queue_s")) for o in overall],
                            "p95_s": [_num(o.get("p95_queue_s")) for o in overall],
                            "mean_error": _num(_pair((calibration.get("overall") or {}).get("mean_queue_s"), "error")),
                            "p95_error": _num(_pair((calibration.get("overall") or {}).get("p95_queue_s"), "error"))}
        found["verdict"] = calibration.get("verdict")
        found["notes"] = [*(calibration.get("notes") or []), *(report.get("notes") or [])]
    return found


def _changes(changes: Iterable[Any], scope: Scope) -> list[str]:
    """_changes is a scenario's changes the scope may see: nodes and trend; shares and demand of its tenants or every one."""
    shown = []
    for change in changes:
        text = str(change)
        if scope is None or text.startswith(("--add-nodes ", "--remove-nodes ", "--trend")):
            shown.append(text)
        elif text.startswith(("--share ", "--demand ")):
            tenant = text.split(" ", 1)[1].rsplit("=", 1)[0]
            if tenant == ANY_TENANT or tenant in scope:
                shown.append(text)
    return shown


def _need(report: dict[str, Any], scope: Scope) -> dict[str, Any]:
    goals = [g for g in report.get("goals") or [] if isinstance(g, dict)]
    today = report.get("today") or {}
    values = list(today.get("values_s") or [])
    rows = []
    for index, goal in enumerate(goals):
        tenant = str(goal.get("tenant"))
        if scope is not None and tenant not in scope:  # a goal on every job ("*") is an overall figure: admins'
            continue
        value = _num(values[index]) if index < len(values) else None
        limit = _num(goal.get("limit_s"))
        rows.append({"tenant": tenant, "stat": goal.get("stat"), "limit_s": limit, "today_s": value,
                     "met": value is not None and limit is not None and value <= limit})
    answer = report.get("answer")
    found: dict[str, Any] = {"runs": ["today"], "tenants": [], "goals": rows,
                             "answer": dict(answer) if isinstance(answer, dict) else None,
                             "simulations": _num(report.get("simulations"))}
    if scope is None:
        found["verdict"] = _pair(report.get("calibration"), "verdict")
        found["searches"] = list(report.get("searches") or [])
    return found
