"""Saved plan reports (migration 0017, issue 23): a round trip, every bound, the newest kept per kind, the save audited."""

from __future__ import annotations

import pytest
from sqlalchemy import func, select

from meta.model.errors import InvalidRequest, NotFound
from meta.store import audit, plan_reports
from meta.store.db import Database
from meta.store.models import PlanReport, PlanReportPlot
from meta.store.plan_reports import PNG_MAGIC, Plot

PNG = PNG_MAGIC + b"\x00" * 64
REPORT = {"window": {"since": "2026-03-01T00:00:00+00:00"}, "tenants": [{"tenant": "tenant-a", "jobs": 3}],
          "policy": "/etc/metasched/policy.toml"}


def _save(db: Database, kind: str = "what-if", name: str = "two more nodes", report: dict | None = None,
          plots: list[Plot] | None = None) -> plan_reports.SavedReport:
    with db.session() as session:
        return plan_reports.save(session, kind, name, report or REPORT,
                                 [Plot("utilization.png", "cluster", PNG), Plot("delays.png", "admin", PNG + b"1")]
                                 if plots is None else plots, actor="root", uid=0)


def _count(db: Database, table: type) -> int:
    with db.session() as session:
        return session.scalar(select(func.count()).select_from(table)) or 0


def test_a_report_and_its_plots_round_trip_and_the_save_is_audited(database: Database) -> None:
    saved = _save(database)
    with database.session() as session:
        (head,) = plan_reports.heads(session)
        whole = plan_reports.load(session, saved.id, with_plots=True)
        cluster_only = plan_reports.load(session, saved.id, audiences=("cluster",))
        lines = audit.read(session)
    assert (head.id, head.kind, head.name, head.created_by, head.report) == (saved.id, "what-if", "two more nodes",
                                                                              "root", None)
    assert [p.name for p in head.plots] == ["delays.png", "utilization.png"] and head.plots[0].png == b""
    assert whole.report == REPORT and {p.name: p.png for p in whole.plots} == {"delays.png": PNG + b"1",
                                                                               "utilization.png": PNG}
    assert [(p.name, p.png) for p in cluster_only.plots] == [("utilization.png", b"")]
    (line,) = [line for line in lines if line.action == plan_reports.SAVE_ACTION]
    assert (line.actor, line.subject) == ("root", f"plan_report:{saved.id}")
    assert line.detail["kind"] == "what-if" and line.detail["plots"] == ["utilization.png", "delays.png"]
    assert "policy" not in str(line.detail) and "window" not in str(line.detail)  # sizes and names, never the content
    with database.session() as session, pytest.raises(NotFound):
        plan_reports.load(session, saved.id + 1)


@pytest.mark.parametrize(
    ("change", "words"),
    [
        ({"name": ""}, "1 to 64 printable"),
        ({"name": "x" * 65}, "1 to 64 printable"),
        ({"name": "a\nb"}, "1 to 64 printable"),
        ({"kind": "history"}, "not one of"),
        ({"report": {"blob": "x" * plan_reports.MAX_REPORT_BYTES}}, "MiB a saved report"),
        ({"report": {"nan": float("nan")}}, "cannot be saved as JSON"),
        ({"plots": [Plot(f"p{i}.png", "cluster", PNG) for i in range(plan_reports.MAX_PLOTS + 1)]}, "at most 4 plots"),
        ({"plots": [Plot("big.png", "cluster", PNG + b"0" * plan_reports.MAX_PLOT_BYTES)]}, "MiB a saved plot"),
        ({"plots": [Plot("x.png", "cluster", b"GIF89a")]}, "not a PNG"),
        ({"plots": [Plot("x.png", "everyone", PNG)]}, "audience"),
        ({"plots": [Plot("x.png", "cluster", PNG), Plot("x.png", "admin", PNG)]}, "two plots"),
    ],
)
def test_every_bound_is_checked_before_anything_is_written(database: Database, change: dict, words: str) -> None:
    with pytest.raises(InvalidRequest, match=words):
        _save(database, **change)
    assert _count(database, PlanReport) == 0 and _count(database, PlanReportPlot) == 0


def test_only_the_newest_of_each_kind_are_kept(database: Database, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(plan_reports, "KEEP_PER_KIND", 3)
    other = _save(database, kind="calibrate", name="calibration")
    ids = [_save(database, name=f"s{i}").id for i in range(5)]
    with database.session() as session:
        kept = [head.id for head in plan_reports.heads(session, kind="what-if")]
        lines = [line for line in audit.read(session) if line.action == plan_reports.SAVE_ACTION]
    assert kept == ids[:1:-1]  # the newest three, newest first
    assert _count(database, PlanReport) == 4 and _count(database, PlanReportPlot) == 8  # the pruned plots went too
    with database.session() as session:
        assert plan_reports.load(session, other.id).name == "calibration"  # another kind is not pruned
    assert lines[0].detail["pruned"] == 1 and lines[-1].detail["pruned"] == 0
