"""benchmarks/bench_plan.py at a tiny size: the store it builds is a history ``plan history`` reads as the builder wrote it.

The builder keeps its own tally of what it did (tasks started before the cut, tasks still running
or waiting for a retry there, tasks never started); the export must find exactly that in the store.
"""

from __future__ import annotations

from collections import Counter
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from benchmarks.bench_plan import Built, build_store, measure, open_empty, stored_window
from meta.model.durations import utcnow
from meta.plan.history import HistoryExport, history_rows
from meta.store.db import Database
from meta.store.models import Attempt, AuditEvent, CycleRecord, InventoryRecord, Transition

START = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)
JOBS, DAYS = 200, 0.15
SEED = 26  # a workload whose 200 jobs include each kind of event (holds, cancels, preemptions, failures)


@pytest.fixture(scope="module")
def built(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[str, Built, Database]]:
    """built is a store of 200 jobs over 3.6 hours, built once for the module."""
    url = f"sqlite:///{tmp_path_factory.mktemp('plan') / 'store.sqlite'}"
    db = open_empty(url)
    tally = build_store(db, JOBS, DAYS, SEED, start=START)
    yield url, tally, db
    db.dispose()


def _export(db: Database) -> HistoryExport:
    """_export is the window of the built store, read as ``plan history`` reads it (the cut: the last cycle)."""
    with db.session() as session:
        return history_rows(session, START, START + timedelta(days=DAYS), utcnow())


def test_plan_history_finds_what_the_builder_wrote(built: tuple[str, Built, Database]) -> None:
    _, tally, db = built
    export = _export(db)
    assert export.jobs == tally.jobs == JOBS
    assert len(export.rows) == tally.rows
    assert export.censored == tally.censored
    assert export.skipped_never_started == tally.never_started
    assert export.skipped_bad_spec == 0
    assert tally.rows + tally.never_started == tally.tasks
    # the tiny history still has each kind of thing the 50,000-job one has
    assert tally.censored > 0 and tally.never_started > 0
    outcomes = Counter(row.outcome for row in export.rows)
    assert outcomes["succeeded"] > 0 and outcomes["running"] > 0 and outcomes["failed"] > 0
    assert any(row.attempts > 1 for row in export.rows)  # retried or requeued after a preemption
    assert any(row.workers > 1 for row in export.rows)  # gangs
    assert {row.job_kind for row in export.rows} == {"training", "inference", "evaluation"}
    assert len({row.tenant for row in export.rows}) == 5


def test_the_store_holds_the_daemon_s_rows(built: tuple[str, Built, Database]) -> None:
    _, tally, db = built
    with db.session() as session:
        actions = Counter(dict(session.execute(select(AuditEvent.action, func.count()).group_by(AuditEvent.action)).all()))
        ended = Counter(dict(session.execute(select(Attempt.state, func.count()).group_by(Attempt.state)).all()))
        assert session.scalar(select(func.count()).select_from(Attempt)) == tally.attempts
        assert session.scalar(select(func.count()).select_from(CycleRecord)) == tally.cycles
        assert session.get(InventoryRecord, 1) is not None
        assert session.scalar(select(func.max(CycleRecord.at))) == START + timedelta(days=DAYS)
        assert session.scalar(select(func.count()).select_from(Transition)) > 3 * tally.attempts
    assert actions["job.release"] == tally.releases > 0
    assert actions["job.cancel"] == tally.cancels > 0
    assert actions["preempt"] == tally.preemptions > 0
    assert ended["succeeded"] > 0 and ended["preempted"] > 0 and ended["failed"] > 0


def test_the_timed_phases_run_on_it(built: tuple[str, Built, Database], tmp_path: Path) -> None:
    url, tally, _ = built
    since, until, jobs = stored_window(url)
    assert jobs == JOBS and datetime.fromisoformat(until) == START + timedelta(days=DAYS)
    csv_path = tmp_path / "trace.csv"
    figures = measure(url, since, until, 2.0, str(csv_path))
    # the window starts at the first submit (a little after START): every job is in it
    assert (figures["rows"], figures["censored"], figures["never_started"]) == (tally.rows, tally.censored,
                                                                                tally.never_started)
    assert len(csv_path.read_text().splitlines()) == tally.rows + 1
    assert figures["replayed"] + figures["unplaced"] == tally.rows
    assert figures["cluster_gpus"] == tally.gpus
