"""Saved capacity-planning reports (``plan calibrate|what-if|need --save``): written, listed, read; bounded and audited.

A report is what the command's ``--json`` prints, with its PNG plots. Every bound is checked
before anything is written: a name of 1 to ``MAX_NAME_CHARS`` printable characters, a report of
at most ``MAX_REPORT_BYTES`` as JSON, at most ``MAX_PLOTS`` plots of at most ``MAX_PLOT_BYTES``
each, and only the newest ``KEEP_PER_KIND`` reports of each kind are kept (older ones are deleted
in the saving transaction). Who may read what is the service's business (``meta/service/plan_reports.py``);
this module stores and returns rows.

The save is on the audit trail (``plan.save``): the report's id, kind, name and sizes, never its
content (the report names a policy file and a cluster file, nothing secret, but it is not the
audit's to copy).
"""

from __future__ import annotations

import json
from collections.abc import Mapping
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from sqlalchemy import delete, select
from sqlalchemy.orm import Session

from meta.model.durations import utcnow
from meta.model.errors import InvalidRequest, NotFound
from meta.model.limits import clip
from meta.store import audit
from meta.store.models import PlanReport, PlanReportPlot

KINDS = ("calibrate", "what-if", "need")
MIB = 1024 * 1024
MAX_NAME_CHARS = 64
MAX_REPORT_BYTES = 2 * MIB  # the JSON as stored; a what-if of 8 scenarios over 12 tenants is a few dozen KiB
MAX_PLOTS = 4
MAX_PLOT_BYTES = 2 * MIB  # one PNG; the what-if's plots at 100 dpi are about 50-150 KiB
KEEP_PER_KIND = 50  # the newest reports of each kind kept; a save deletes the older ones
MAX_LIST = 500  # rows of one listing (KINDS × KEEP_PER_KIND is less)
AUDIENCES = ("cluster", "admin")  # cluster: only cluster-wide figures (coordinators may see it); admin: every tenant's
SAVE_ACTION = "plan.save"
PNG_MAGIC = b"\x89PNG\r\n\x1a\n"


@dataclass(frozen=True)
class Plot:
    """Plot is one PNG of a report and who may see it (``cluster`` or ``admin``)."""

    name: str
    audience: str
    png: bytes = field(repr=False)


@dataclass(frozen=True)
class SavedReport:
    """SavedReport is one stored report: its head, the report (None when listed) and its plots (bytes only when asked)."""

    id: int
    kind: str
    name: str
    created_at: datetime
    created_by: str
    report_bytes: int
    plots: tuple[Plot, ...] = ()
    report: dict[str, Any] | None = None


def check_name(name: str) -> str:
    """check_name is ``name`` stripped, refused unless 1 to MAX_NAME_CHARS printable characters."""
    text = (name or "").strip()
    if not 1 <= len(text) <= MAX_NAME_CHARS or not text.isprintable():
        raise InvalidRequest(clip(f"a saved report's name must be 1 to {MAX_NAME_CHARS} printable characters, "
                                  f"not {name!r}"))
    return text


def encoded(report: Mapping[str, Any]) -> bytes:
    """encoded is the report as the store keeps it (canonical JSON), refused over MAX_REPORT_BYTES."""
    try:
        data = json.dumps(report, sort_keys=True, separators=(",", ":"), allow_nan=False).encode("utf-8")
    except (TypeError, ValueError) as exc:
        raise InvalidRequest(f"the report cannot be saved as JSON: {exc}") from None
    if len(data) > MAX_REPORT_BYTES:
        raise InvalidRequest(f"the report is {len(data)} bytes as JSON, over the {MAX_REPORT_BYTES // MIB} MiB a saved "
                             "report may hold (fewer scenarios or tenants)")
    return data


def check_plots(plots: list[Plot]) -> None:
    """check_plots refuses more than MAX_PLOTS plots, a plot over MAX_PLOT_BYTES, a non-PNG, a bad name or audience."""
    if len(plots) > MAX_PLOTS:
        raise InvalidRequest(f"a saved report holds at most {MAX_PLOTS} plots, not {len(plots)}")
    names = set()
    for plot in plots:
        check_name(plot.name)
        if plot.name in names:
            raise InvalidRequest(clip(f"two plots named {plot.name!r}"))
        names.add(plot.name)
        if plot.audience not in AUDIENCES:
            raise InvalidRequest(clip(f"plot {plot.name!r}: audience {plot.audience!r} is not one of {AUDIENCES}"))
        if not plot.png.startswith(PNG_MAGIC):
            raise InvalidRequest(clip(f"plot {plot.name!r} is not a PNG"))
        if len(plot.png) > MAX_PLOT_BYTES:
            raise InvalidRequest(clip(f"plot {plot.name!r} is {len(plot.png)} bytes, over the "
                                      f"{MAX_PLOT_BYTES // MIB} MiB a saved plot may hold"))


def save(session: Session, kind: str, name: str, report: Mapping[str, Any], plots: list[Plot], *, actor: str,
         uid: int | None = None) -> SavedReport:
    """save stores a report and its plots, keeps the newest KEEP_PER_KIND of its kind, and audits the save.

    Every bound is checked before the first write (InvalidRequest names the one broken).
    """
    if kind not in KINDS:
        raise InvalidRequest(f"report kind {kind!r} is not one of {', '.join(KINDS)}")
    name = check_name(name)
    data = encoded(report)
    check_plots(plots)
    row = PlanReport(kind=kind, name=name, created_at=utcnow(), created_by=actor[:256], report=json.loads(data),
                     report_bytes=len(data))
    session.add(row)
    session.flush()  # the id
    for plot in plots:
        session.add(PlanReportPlot(report_id=row.id, name=plot.name, audience=plot.audience, png=plot.png))
    pruned = _keep_newest(session, kind)
    audit.record(session, actor, SAVE_ACTION, f"plan_report:{row.id}", kind=kind, name=name, report_bytes=len(data),
                 plots=[plot.name for plot in plots], plot_bytes=sum(len(p.png) for p in plots), pruned=pruned,
                 uid=uid)
    return SavedReport(row.id, kind, name, row.created_at, row.created_by, len(data),
                       tuple(Plot(p.name, p.audience, b"") for p in plots), row.report)


def _keep_newest(session: Session, kind: str) -> int:
    """_keep_newest deletes the reports of ``kind`` older than its newest KEEP_PER_KIND (their plots first)."""
    ids = list(session.scalars(select(PlanReport.id).where(PlanReport.kind == kind).order_by(PlanReport.id.desc())
                               .offset(KEEP_PER_KIND)))
    if not ids:
        return 0
    session.execute(delete(PlanReportPlot).where(PlanReportPlot.report_id.in_(ids)))
    session.execute(delete(PlanReport).where(PlanReport.id.in_(ids)))
    return len(ids)


def heads(session: Session, *, kind: str | None = None, limit: int = MAX_LIST) -> list[SavedReport]:
    """heads lists saved reports newest first (no report, plots without their bytes), optionally of one kind."""
    query = (select(PlanReport.id, PlanReport.kind, PlanReport.name, PlanReport.created_at, PlanReport.created_by,
                    PlanReport.report_bytes).order_by(PlanReport.id.desc()).limit(max(1, min(limit, MAX_LIST))))
    if kind is not None:
        query = query.where(PlanReport.kind == kind)
    rows = session.execute(query).all()
    plots = _plot_heads(session, [r.id for r in rows])
    return [SavedReport(r.id, r.kind, r.name, r.created_at, r.created_by, r.report_bytes, plots.get(r.id, ()))
            for r in rows]


def _plot_heads(session: Session, ids: list[int]) -> dict[int, tuple[Plot, ...]]:
    """_plot_heads is each report's plots, names and audiences only."""
    found: dict[int, list[Plot]] = {}
    if ids:
        query = (select(PlanReportPlot.report_id, PlanReportPlot.name, PlanReportPlot.audience)
                 .where(PlanReportPlot.report_id.in_(ids)).order_by(PlanReportPlot.report_id, PlanReportPlot.name))
        for report_id, name, audience in session.execute(query):
            found.setdefault(report_id, []).append(Plot(name, audience, b""))
    return {key: tuple(value) for key, value in found.items()}


def load(session: Session, report_id: int, *, audiences: tuple[str, ...] = AUDIENCES,
         with_plots: bool = False) -> SavedReport:
    """load is one report with its plots of ``audiences`` (their bytes when ``with_plots``); NotFound if there is none."""
    row = session.get(PlanReport, report_id)
    if row is None:
        raise NotFound(f"no saved plan report {report_id}")
    columns = [PlanReportPlot.name, PlanReportPlot.audience] + ([PlanReportPlot.png] if with_plots else [])
    query = (select(*columns).where(PlanReportPlot.report_id == report_id, PlanReportPlot.audience.in_(audiences))
             .order_by(PlanReportPlot.name))
    plots = tuple(Plot(r.name, r.audience, bytes(r.png) if with_plots else b"") for r in session.execute(query))
    return SavedReport(row.id, row.kind, row.name, row.created_at, row.created_by, row.report_bytes, plots,
                       dict(row.report))
