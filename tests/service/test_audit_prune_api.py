"""``metasched audit prune``: admins only, explicit (--yes), at least a day old, and on the record (issue 22, S9)."""

from __future__ import annotations

from collections.abc import Iterator
from datetime import timedelta
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from meta.model.durations import utcnow
from meta.service.api import Service
from meta.store import audit
from meta.store.models import AuditEvent
from tests.api_support import RunningApi, client_env, sqlite_running_api


@pytest.fixture
def served(tmp_path: Path) -> Iterator[tuple[RunningApi, Service]]:
    """served is the API over SQLite with three audit lines: 200, 100 and 10 days old."""
    with sqlite_running_api(tmp_path) as (running, service):
        with service.db.session() as session:
            for days in (200, 100, 10):
                session.add(AuditEvent(at=utcnow() - timedelta(days=days), actor="t", action=f"old{days}",
                                       tenant="tenant-a", subject="s", detail={}))  # fmt: skip
        yield running, service


def _run(running: RunningApi, folder: Path, uid: int, *args: str) -> Result:
    return CliRunner().invoke(
        cli, list(args), env=client_env(running.address, folder, uid), prog_name="metasched"
    )


def _actions(service: Service) -> list[str]:
    with service.db.session() as session:
        return sorted(line.action for line in audit.read(session, limit=1000))


def test_an_admin_prunes_by_age_and_the_prune_is_audited(
    served: tuple[RunningApi, Service], tmp_path: Path
) -> None:
    running, service = served
    result = _run(running, tmp_path, 0, "audit", "prune", "--before", "90d", "--yes", "--json")
    assert result.exit_code == 0, result.output
    assert '"deleted": 2' in result.output
    assert _actions(service) == ["audit.prune", "old10"]
    with service.db.session() as session:
        (line,) = [e for e in audit.read(session) if e.action == "audit.prune"]
    assert line.actor == "root" and line.detail["deleted"] == 2 and line.detail["asked"] == "90d"


def test_prune_refuses_without_yes(served: tuple[RunningApi, Service], tmp_path: Path) -> None:
    running, service = served
    result = _run(running, tmp_path, 0, "audit", "prune", "--before", "90d")
    assert result.exit_code == 2 and "--yes" in result.output and "Traceback" not in result.output
    assert _actions(service) == ["old10", "old100", "old200"]


def test_prune_is_for_admins_only_and_the_refusal_is_audited(
    served: tuple[RunningApi, Service], tmp_path: Path
) -> None:
    running, service = served
    result = _run(running, tmp_path, 1001, "audit", "prune", "--before", "90d", "--yes")
    assert result.exit_code == 1 and "only an admin" in result.output
    assert "request.refused" in _actions(service) and "old200" in _actions(service)


@pytest.mark.parametrize("before", ["1h", "0", "yesterday-ish", "9999-01-01"])
def test_prune_refuses_what_is_not_at_least_a_day_back(
    served: tuple[RunningApi, Service], tmp_path: Path, before: str
) -> None:
    running, service = served
    result = _run(running, tmp_path, 0, "audit", "prune", "--before", before, "--yes")
    assert result.exit_code == 2 and "--before" in result.output, result.output
    assert _actions(service) == ["old10", "old100", "old200"]


def test_the_audit_listing_still_works(served: tuple[RunningApi, Service], tmp_path: Path) -> None:
    running, _ = served
    result = _run(running, tmp_path, 0, "audit", "--limit", "2")
    assert result.exit_code == 0, result.output
    assert "old10" in result.output and "old200" not in result.output
