"""Refusals on the record at a bounded rate (issue 22, S9, S12): a few rows in full per group and window, then a count."""

from __future__ import annotations

import time
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from prometheus_client import CollectorRegistry

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from fastapi.testclient import TestClient

from meta.service.api import Service
from meta.service.http import create_app
from meta.service.http_metrics import ApiMetrics
from meta.service.refusal_audit import (
    AUTH_ACTION,
    FULL_ENV,
    SUMMARY_ACTION,
    WINDOW_ENV,
    Refusal,
    RefusalAudit,
    from_env,
)
from meta.store import audit
from meta.store.db import Database
from tests.api_support import ALICE, BOB, TestAuthenticator, principal_for
from tests.conftest import sqlite_database


class Clock:
    """Clock is a settable monotonic clock."""

    def __init__(self) -> None:
        self.now = 1000.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    """db is a migrated SQLite store."""
    database = sqlite_database(tmp_path / "refusals.sqlite")
    yield database
    database.dispose()


def _lines(db: Database, action: str | None = None) -> list[Any]:
    with db.session() as session:
        lines = audit.read(session, limit=100_000)
    return [line for line in lines if action is None or line.action == action]


def test_a_flood_writes_a_few_rows_and_one_summary_with_the_count(db: Database) -> None:
    clock = Clock()
    refusals = RefusalAudit(db, window_s=60, full_per_window=5, clock=clock, autoflush=False)
    written = [
        refusals.refused(Refusal("mallory", "output.commit.refused", "a1", "NotFound")) for _ in range(1_000)
    ]
    refusals.refused(
        Refusal("bob", "output.commit.refused", "a2", "Forbidden")
    )  # another caller: its own share
    assert written.count(True) == 5
    assert len(_lines(db, "output.commit.refused")) == 6
    assert refusals.flush() == 0 and not _lines(db, SUMMARY_ACTION)  # the window is still open
    clock.now += 60
    assert refusals.flush() == 1  # bob's window had nothing counted only: no summary for it
    (summary,) = _lines(db, SUMMARY_ACTION)
    assert summary.actor == "mallory" and summary.subject == "output.commit.refused"
    assert summary.detail["refused"] == 1_000 and summary.detail["counted_only"] == 995
    assert summary.detail["kind"] == "NotFound" and summary.detail["window_s"] == 60
    # the next window starts afresh
    assert refusals.refused(Refusal("mallory", "output.commit.refused", "a1", "NotFound"))


def test_groups_in_memory_are_bounded(db: Database) -> None:
    refusals = RefusalAudit(db, full_per_window=1, max_groups=10, clock=Clock(), autoflush=False)
    for i in range(500):
        refusals.refused(Refusal(f"ip:10.0.{i // 256}.{i % 256}", AUTH_ACTION, "GET /v1/jobs", "invalid"))
    assert len(refusals._windows) == 11  # ten peers and the shared "(others)" group
    assert len(_lines(db, AUTH_ACTION)) == 11
    assert refusals.flush(everything=True) == 1
    (summary,) = _lines(db, SUMMARY_ACTION)
    assert summary.actor == "(others)" and summary.detail["refused"] == 490


def test_the_timer_writes_the_summary_when_the_window_closes(db: Database) -> None:
    refusals = RefusalAudit(db, window_s=0.2, full_per_window=1)
    for _ in range(3):
        refusals.refused(Refusal("mallory", "secret.read.refused", "a1", "NotFound"))
    deadline = time.monotonic() + 5
    while not _lines(db, SUMMARY_ACTION) and time.monotonic() < deadline:
        time.sleep(0.05)
    (summary,) = _lines(db, SUMMARY_ACTION)
    assert summary.detail["refused"] == 3 and summary.detail["counted_only"] == 2


@pytest.fixture
def api(db: Database) -> Iterator[tuple[TestClient, RefusalAudit, CollectorRegistry]]:
    """api is the app with a refusal audit on a settable clock and metrics on a fresh registry."""
    clock = Clock()
    refusals = RefusalAudit(db, window_s=60, full_per_window=3, clock=clock, autoflush=False)
    registry = CollectorRegistry()
    app = create_app(
        Service(db), TestAuthenticator(), principal_for, metrics=ApiMetrics(registry), refusals=refusals,
        secrets_root=db.url,  # never read: bob is refused before
    )  # fmt: skip
    with TestClient(app) as client:
        yield client, refusals, registry
    refusals.clock = lambda: clock.now + 60


def test_job_side_refusals_through_the_api_are_bounded(
    api: tuple[TestClient, RefusalAudit, Any], db: Database
) -> None:
    client, refusals, _ = api
    for i in range(200):
        answer = client.post(
            f"/v1/attempts/nope{i}/commit", json={"token": 1, "manifest": {}}, headers={"Authorization": BOB}
        )
        assert answer.status_code == 404
    assert len(_lines(db)) == 3  # three in full, whatever the flood
    refusals.flush(everything=True)
    (summary,) = _lines(db, SUMMARY_ACTION)
    assert summary.actor == "bob" and summary.detail["refused"] == 200


def test_every_authentication_failure_is_counted_and_audited_by_peer(
    api: tuple[TestClient, RefusalAudit, CollectorRegistry], db: Database
) -> None:
    client, refusals, registry = api
    for _ in range(50):
        assert client.get("/v1/jobs", headers={"Authorization": "Basic c2VjcmV0"}).status_code == 401
    assert client.get("/v1/jobs/j1").status_code == 401
    assert registry.get_sample_value("metasched_api_auth_failures_total", {"reason": "malformed"}) == 50
    assert registry.get_sample_value("metasched_api_auth_failure_peers") == 1  # the one test client
    full = _lines(db, AUTH_ACTION)
    assert len(full) == 4  # three malformed, one missing
    assert {line.actor for line in full} == {"ip:testclient"}
    assert {line.subject for line in full} == {
        "GET /v1/jobs",
        "GET /v1/jobs/{ref}",
    }  # templates, never the path
    refusals.flush(everything=True)
    (summary,) = _lines(db, SUMMARY_ACTION)
    assert summary.detail == {
        **summary.detail,
        "kind": "malformed",
        "refused": 50,
        "refused_action": AUTH_ACTION,
    }
    assert "c2VjcmV0" not in repr(_lines(db))  # the credential never reaches the audit


def test_an_authorization_refusal_is_audited(api: tuple[TestClient, RefusalAudit, Any], db: Database) -> None:
    client, _, _ = api
    answer = client.put(
        "/v1/tenants/tenant-a/secrets/token", json={"value": "s3cr3t"}, headers={"Authorization": BOB}
    )
    assert answer.status_code == 403
    answer = client.get("/v1/jobs?as_tenant=tenant-a", headers={"Authorization": BOB})
    assert answer.status_code == 400  # not one of bob's accounts (sbatch's words)
    assert client.get("/v1/whoami", headers={"Authorization": ALICE}).status_code == 200
    lines = _lines(db, "request.refused")
    assert [(line.actor, line.subject, line.detail["kind"]) for line in reversed(lines)] == [
        ("bob", "set_secret", "Forbidden"),
        ("bob", "list_jobs", "InvalidAccount"),
    ]
    assert "s3cr3t" not in repr(_lines(db))


def test_closing_writes_the_open_windows_summaries(db: Database) -> None:
    refusals = RefusalAudit(db, window_s=3600, full_per_window=1, clock=Clock())
    for _ in range(4):
        refusals.refused(Refusal("mallory", "secret.read.refused", "a1", "NotFound"))
    refusals.close()  # the service stops long before the hour is over (also run at exit for live ones)
    (summary,) = _lines(db, SUMMARY_ACTION)
    assert summary.detail["refused"] == 4


def test_the_environment_sets_window_and_share_and_bad_values_keep_the_defaults(db: Database) -> None:
    chosen = from_env(db, {WINDOW_ENV: "5", FULL_ENV: "2"})
    assert (chosen.window_s, chosen.full_per_window) == (5.0, 2)
    for bad in ("nan", "-1", "1e9", "soon"):
        kept = from_env(db, {WINDOW_ENV: bad, FULL_ENV: bad})
        assert (kept.window_s, kept.full_per_window) == (60.0, 5)
