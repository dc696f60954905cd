"""Rolling upgrades (docs/upgrades.md): the lead moves forward only; serve on a store of another schema.

- a standby (or a replica that lost its lease) does not take the lead on a store whose schema
  a newer metasched migrated: it gives the lease straight back and stands by; a leader keeps
  its lease through such a migration (it renews, it never re-takes);
- ``metasched serve`` on a store behind its schema neither serves nor leads until
  ``db upgrade`` ran (``open_at_head`` waits, logging why), and refuses a newer store.
"""

from __future__ import annotations

import logging
import threading
from pathlib import Path

import pytest
from sqlalchemy import text

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.lease import LEASE_NAME
from meta.serve.run import ServeError, open_at_head
from meta.service.api import Service
from meta.store.migrate import head_revision
from meta.store.models import LeaderLease
from meta.store.schema_plan import SchemaBehind, SchemaNewer
from slurm_bridge.fake import FakeSlurm, small_cluster


def _daemon(service: Service, tmp_path: Path, holder: str) -> Daemon:
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder=holder, submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=30))  # fmt: skip
    return Daemon(service.db, FakeSlurm(small_cluster()), config)


def _stamp(service: Service, revision: str) -> None:
    with service.db.engine.begin() as connection:
        connection.execute(text("UPDATE alembic_version SET version_num = :r"), {"r": revision})


def _holder(service: Service) -> tuple[str, int]:
    with service.db.session() as session:
        row = session.get(LeaderLease, LEASE_NAME)
        assert row is not None
        return row.holder, row.epoch


def test_the_lead_never_goes_back_to_a_replica_older_than_the_schema(
    service: Service, tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    leader, standby = _daemon(service, tmp_path, "n-leader"), _daemon(service, tmp_path, "n-standby")
    try:
        assert leader.period().leader and not standby.period().leader
        _stamp(service, "9999")  # a newer metasched's db upgrade (an online-safe migration)
        assert leader.period().leader  # the leader keeps its lease: it renews, never re-takes
        assert _holder(service)[0] == "n-leader"
        leader.run(stop=_set_event())  # SIGTERM: the leader stops and releases its lease
        with caplog.at_level(logging.WARNING, logger="metasched.daemon"):
            assert not standby.period().leader
        assert "schema 9999, newer than this version knows" in caplog.text
        holder, epoch = _holder(service)
        with service.db.session() as session:
            row = session.get(LeaderLease, LEASE_NAME)
            assert row is not None and row.holder == "n-standby" and row.expires_at < row.renewed_at
        assert not standby.period().leader and _holder(service) == (holder, epoch)  # no churn: it waits
        _stamp(service, head_revision())  # the newer version's schema is gone (e.g. a restored backup): it may lead
        standby._behind_until = 0.0
        assert standby.period().leader
    finally:
        leader.close_launches()
        standby.close_launches()


def _set_event() -> threading.Event:
    stop = threading.Event()
    stop.set()
    return stop


def test_serve_waits_for_db_upgrade_on_an_older_store(caplog: pytest.LogCaptureFixture) -> None:
    opened: list[str] = []
    answers: list[object] = [SchemaBehind("0015", "0016", []), SchemaBehind("0015", "0016", []), "service"]

    def open_service() -> object:
        opened.append("try")
        answer = answers.pop(0)
        if isinstance(answer, Exception):
            raise answer
        return answer

    stop = threading.Event()
    with caplog.at_level(logging.INFO, logger="metasched.serve"):
        assert open_at_head(open_service, stop, period_s=0.01) == "service"  # type: ignore[arg-type]
    assert len(opened) == 3
    said = [r.getMessage() for r in caplog.records]
    assert sum("not serving the API nor leading until it has" in line for line in said) == 1  # once, not per try
    assert "run `metasched db upgrade`" in said[0] and said[-1].endswith("starting")


def test_serve_stops_while_waiting_and_refuses_a_newer_store() -> None:
    stop = threading.Event()
    stop.set()

    def behind() -> Service:
        raise SchemaBehind("0015", "0016", [])

    assert open_at_head(behind, stop, period_s=0.01) is None
    with pytest.raises(ServeError, match="at schema 0015"):
        open_at_head(behind, threading.Event(), period_s=0.01, once=True)  # --once: no waiting

    def newer() -> Service:
        raise SchemaNewer("0099", "0016")

    with pytest.raises(ServeError, match="does not ship") as refused:
        open_at_head(newer, threading.Event(), period_s=0.01)
    assert refused.value.code == 1
