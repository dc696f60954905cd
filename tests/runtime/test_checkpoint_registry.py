"""Checkpoint registry (fenced reports, latest by step) and checkpoint policy (Young/Daly)."""

from __future__ import annotations

import math
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner

from checkpoint import attempt_secret
from checkpoint.policy import (
    allocation_mtbf_s,
    expected_waste_fraction,
    recommend_interval_s,
    young_daly_interval_s,
)
from checkpoint.registry import history, latest, report
from cli.main import cli
from meta.model.durations import utcnow
from meta.model.errors import InvalidRequest, NotFound, StaleFencingToken
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store import audit
from meta.store.lifecycle import attempt_event
from meta.store.models import Attempt, Job, Task
from tests.runtime.support import attempt, checkpointing, place, share, submit


def _running(service: Service, **kw) -> tuple[str, str]:
    _, (t,) = submit(service, checkpointing())
    return t, place(service.db, t, [share("node1")], AttemptState.RUNNING, **kw)


def test_report_records_a_checkpoint_of_the_current_attempt(service: Service) -> None:
    t, a = _running(service)
    with service.db.session() as session:
        view = report(session, a, 1, 100, "/ck/100", size_bytes=10, duration_s=4.5)
    assert (view.task_id, view.attempt_id, view.step, view.path) == (t, a, 100, "/ck/100")
    assert view.size_bytes == 10 and view.duration_s == 4.5


def test_report_rejects_a_stale_token(service: Service) -> None:
    t, a = _running(service)
    with pytest.raises(StaleFencingToken), service.db.session() as session:
        report(session, a, 2, 100, "/ck/100")
    with service.db.session() as session:
        assert latest(session, t) is None


def test_report_rejects_an_attempt_that_is_no_longer_current(service: Service) -> None:
    t, old = _running(service)
    with service.db.session() as session:
        attempt_event(session, old, AttemptState.PREEMPTED, "test:preempt")
    new = place(service.db, t, [share("node2")], AttemptState.RUNNING)
    with pytest.raises(StaleFencingToken), service.db.session() as session:
        report(session, old, 1, 5, "/ck/late")  # its own token, but it is over
    with service.db.session() as session:
        report(session, new, 2, 6, "/ck/new")
        assert latest(session, t).attempt_id == new


def test_report_is_accepted_while_stopping_even_past_the_lease(service: Service) -> None:
    _, (t,) = submit(service, checkpointing())
    a = place(service.db, t, [share("node1")], AttemptState.STOPPING, stop_reason="preempt",
              values={"lease_expires_at": utcnow() - timedelta(seconds=30)})
    with service.db.session() as session:
        assert report(session, a, 1, 7, "/ck/7").step == 7


def test_report_validates_its_input(service: Service) -> None:
    _, a = _running(service)
    with pytest.raises(InvalidRequest), service.db.session() as session:
        report(session, a, 1, -1, "/ck")
    with pytest.raises(InvalidRequest), service.db.session() as session:
        report(session, a, 1, 1, "")
    with pytest.raises(NotFound), service.db.session() as session:
        report(session, "no-such-attempt", 1, 1, "/ck")


def test_latest_picks_the_highest_step_and_history_is_by_time(service: Service) -> None:
    t, a = _running(service)
    base = utcnow().replace(microsecond=0)
    with service.db.session() as session:
        report(session, a, 1, 10, "/ck/10", now=base)
        report(session, a, 1, 30, "/ck/30", now=base + timedelta(seconds=1))
        report(session, a, 1, 20, "/ck/20", now=base + timedelta(seconds=2))  # written later, older step
    with service.db.session() as session:
        assert latest(session, t).path == "/ck/30"
        assert [c.step for c in history(session, t)] == [10, 30, 20]


def test_latest_breaks_step_ties_by_time(service: Service) -> None:
    t, a = _running(service)
    base = utcnow().replace(microsecond=0)
    with service.db.session() as session:
        report(session, a, 1, 10, "/ck/old", now=base)
        report(session, a, 1, 10, "/ck/new", now=base + timedelta(seconds=5))
    with service.db.session() as session:
        assert latest(session, t).path == "/ck/new"


def test_attempt_row_is_untouched_by_reports(service: Service) -> None:
    _, a = _running(service)
    before = attempt(service.db, a)
    with service.db.session() as session:
        report(session, a, 1, 1, "/ck/1")
        assert session.get(Attempt, a).version == before.version


def test_a_checkpoint_report_is_audited(service: Service) -> None:
    t, a = _running(service)
    with service.db.session() as session:
        report(session, a, 1, 100, "/ck/100", actor="alice")
    with pytest.raises(StaleFencingToken), service.db.session() as session:
        report(session, a, 9, 101, "/ck/101", actor="mallory")  # refused: no line
    with service.db.session() as session:
        events = audit.read(session)
        job = session.get(Job, session.get(Task, t).job_id)
    assert [(e.actor, e.action, e.tenant, e.subject) for e in events] == [
        ("alice", "checkpoint.report", "acme", job.short_id)
    ]
    assert events[0].detail == {"task": 0, "attempt": a, "fencing_token": 1, "step": 100}


def test_cli_report_never_sizes_a_file_through_a_symlink(service: Service, tmp_path: Path) -> None:
    t, a = _running(service)
    secret = tmp_path / "shadow"
    secret.write_bytes(b"x" * 1234)
    (tmp_path / "ckpt").symlink_to(secret)
    (tmp_path / "real").write_bytes(b"y" * 7)
    proof, digest = attempt_secret.new_secret()  # root's local mode proves the attempt like any job
    with service.db.session() as session:
        session.get(Attempt, a).secret_hash = digest  # type: ignore[union-attr]
    env = {"METASCHED_DB": service.db.url, "METASCHED_TENANT": None, "METASCHED_ATTEMPT_SECRET": proof}
    for name in ("ckpt", "real"):
        argv = ["checkpoint", "report", "--step", "1", "--path", str(tmp_path / name), "--attempt", a, "--token", "1"]
        assert CliRunner().invoke(cli, argv, env=env).exit_code == 0
    with service.db.session() as session:
        assert [(Path(c.path).name, c.size_bytes) for c in history(session, t)] == [("ckpt", None), ("real", 7)]


# --- policy ---------------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("cost", "mtbf", "want"),
    [
        (60.0, 86400.0, math.sqrt(2 * 60 * 86400) - 60),
        (30.0, 3600.0, math.sqrt(2 * 30 * 3600) - 30),
        (1.0, 0.5, 0.5),  # cost ≥ 2·MTBF: checkpoint as often as failures come
    ],
)
def test_young_daly_interval(cost: float, mtbf: float, want: float) -> None:
    assert young_daly_interval_s(cost, mtbf) == pytest.approx(want)


def test_young_daly_known_value() -> None:
    assert young_daly_interval_s(60, 86400) == pytest.approx(3159.94, abs=0.01)


@pytest.mark.parametrize(("cost", "mtbf"), [(0, 100), (-1, 100), (10, 0), (10, -5)])
def test_young_daly_rejects_non_positive_inputs(cost: float, mtbf: float) -> None:
    with pytest.raises(ValueError):
        young_daly_interval_s(cost, mtbf)


def test_allocation_mtbf_divides_by_nodes() -> None:
    assert allocation_mtbf_s(86400 * 8, 8) == 86400
    assert allocation_mtbf_s(1000, 1) == 1000
    with pytest.raises(ValueError):
        allocation_mtbf_s(1000, 0)
    with pytest.raises(ValueError):
        allocation_mtbf_s(0, 2)


def test_recommend_interval_uses_the_median_measured_cost() -> None:
    node_mtbf, nodes = 86400.0 * 4, 4
    assert recommend_interval_s([90, 30, 60, 0, -5], node_mtbf, nodes) == pytest.approx(young_daly_interval_s(60, 86400))
    assert recommend_interval_s([500, 10, 20], node_mtbf, nodes) == pytest.approx(young_daly_interval_s(20, 86400))
    assert recommend_interval_s([], node_mtbf, nodes, fallback_cost_s=45) == pytest.approx(young_daly_interval_s(45, 86400))


def test_expected_waste_is_minimal_near_young_daly() -> None:
    cost, mtbf = 60.0, 86400.0
    best = young_daly_interval_s(cost, mtbf)
    at_best = expected_waste_fraction(best, cost, mtbf)
    assert at_best < expected_waste_fraction(best / 3, cost, mtbf)
    assert at_best < expected_waste_fraction(best * 3, cost, mtbf)
    with pytest.raises(ValueError):
        expected_waste_fraction(0, cost, mtbf)
