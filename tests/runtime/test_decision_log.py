"""The decision log: rows round-trip, are append-only, are pruned by age and count; the daemon writes them."""

from __future__ import annotations

from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select, text, update

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.apply.decision_log import CONTEXT, DecisionLogSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.model.durations import utcnow
from meta.policy.decisions import PLACE
from meta.service.api import Service
from meta.store import decision_log
from meta.store.db import Database
from meta.store.models import DecisionRow, ImmutableRowError
from slurm_bridge.fake import FakeSlurm, sinfo_node
from tests.runtime.support import submit, training


def _rows(n: int, job: str = "j") -> list[dict]:
    return [{"kind": PLACE, "task_id": f"t{i}", "job_id": f"{job}{i}", "tenant": "acme", "other_job": None,
             "record": {"key": {"tier": "class", "share": 0.5}, "alternatives": [{"task": "x", "lost": "why"}]}}
            for i in range(n)]  # fmt: skip


def _count(db: Database) -> int:
    with db.session() as session:
        return session.scalar(select(func.count()).select_from(DecisionRow))


def test_rows_round_trip_and_are_append_only(database: Database) -> None:
    at = utcnow()
    with database.session() as session:
        assert decision_log.append(session, _rows(3), cycle=7, at=at, epoch=2) == 3
    with database.session() as session:
        rows = list(session.scalars(select(DecisionRow).order_by(DecisionRow.id)))
        assert [(r.cycle, r.epoch, r.kind, r.task_id, r.job_id) for r in rows] == [
            (7, 2, PLACE, f"t{i}", f"j{i}") for i in range(3)]
        assert rows[0].record == {"key": {"tier": "class", "share": 0.5}, "alternatives": [{"task": "x", "lost": "why"}]}
        assert abs((rows[0].at - at).total_seconds()) < 1e-3
    with pytest.raises(ImmutableRowError), database.session() as session:
        session.scalars(select(DecisionRow)).first().kind = "hold"
    with pytest.raises(Exception, match="write-once|append-only"), database.session() as session:
        session.execute(update(DecisionRow).values(kind="hold"))  # the trigger refuses any client


def test_prune_by_age_then_by_count(database: Database) -> None:
    now = utcnow()
    with database.session() as session:
        decision_log.append(session, _rows(5, "old"), cycle=1, at=now - timedelta(days=9), epoch=1)
        decision_log.append(session, _rows(8, "new"), cycle=2, at=now, epoch=1)
    with database.session() as session:
        assert decision_log.prune(session, now, max_age_s=7 * 86400, max_rows=None) == 5
    assert _count(database) == 8
    with database.session() as session:
        assert decision_log.prune(session, now, max_age_s=7 * 86400, max_rows=3) == 5
    with database.session() as session:
        kept = list(session.scalars(select(DecisionRow.task_id).order_by(DecisionRow.id)))
    assert kept == ["t5", "t6", "t7"]  # the newest rows stay


def _daemon(service: Service, fake: FakeSlurm, tmp_path: Path, settings: DecisionLogSettings) -> Daemon:
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder="decisions", submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / "logs")), decisions=settings)  # fmt: skip
    return Daemon(service.db, fake, config)


def test_daemon_records_each_cycle_and_prunes(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm([sinfo_node("node1", gpus=2)])
    first, _ = submit(service, training("first", tenant="acme"))
    second, _ = submit(service, training("second", tenant="other"))
    daemon = _daemon(service, fake, tmp_path, DecisionLogSettings(max_rows=4, prune_every_s=0.0))
    daemon.period()
    with service.db.session() as session:
        rows = list(session.scalars(select(DecisionRow).order_by(DecisionRow.id)))
    kinds = [r.kind for r in rows]
    assert kinds == [CONTEXT, PLACE] and daemon.decision_log.last_rows == 2
    place = rows[1]
    assert place.job_id == first and place.tenant == "acme"
    (alt,) = place.record["alternatives"]
    assert alt["job"] == second and alt["tenant"] == "other" and alt["lost"].startswith("behind in line")
    assert set(rows[0].record["tenants"]) == {"acme", "other"} and rows[0].record["pending"] == 2
    for _ in range(4):
        daemon.period()
    assert _count(service.db) <= 4  # pruned by count every period here


def test_off_writes_nothing(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm([sinfo_node("node1", gpus=2)])
    submit(service, training("only"))
    daemon = _daemon(service, fake, tmp_path, DecisionLogSettings(enabled=False))
    daemon.period()
    assert _count(service.db) == 0


@pytest.mark.postgres
def test_trigger_exists_on_postgres(pg_database: Database) -> None:
    with pg_database.session() as session:
        names = set(session.scalars(text("SELECT tgname FROM pg_trigger WHERE tgrelid = 'decisions'::regclass")))
    assert "decisions_append_only" in names

