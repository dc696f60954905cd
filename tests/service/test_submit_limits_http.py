"""Tenant submit limits through the HTTP API (issue 16): 403 over a pending-job limit, 429 with Retry-After.

The app over a Service with a SubmitGate (SQLite and PostgreSQL), the test-only authenticator;
limits set the way an admin sets them (``PUT /v1/tenants/{name}`` with ``submit``).
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from meta.service.api import Service
from meta.service.http import create_app
from meta.service.http_metrics import ApiMetrics
from meta.service.submit_gate import SubmitGate
from tests.api_support import ALICE, BOB, ROOT, TestAuthenticator, principal_for

JOB = "kind: evaluation\nname: e\ntenant: TENANT\nresources: {cpus: 1, memory: 1G}\ncommand: 'true'\n"


class Clock:
    """Clock is a monotonic clock the test moves by hand."""

    now = 100.0

    def __call__(self) -> float:
        return self.now


@pytest.fixture
def clock() -> Clock:
    return Clock()


@pytest.fixture
def metrics() -> ApiMetrics:
    return ApiMetrics()


@pytest.fixture
def api(service: Service, tmp_path: Path, clock: Clock, metrics: ApiMetrics) -> Iterator[TestClient]:
    service.gate = SubmitGate(service.db, clock=clock, on_refusal=metrics.submit_refused)
    app = create_app(service, TestAuthenticator(), principal_for, secrets_root=tmp_path / "secrets", metrics=metrics)
    with TestClient(app) as client:
        yield client


def _batch(api: TestClient, who: str, tenant: str, count: int, text: str | None = None) -> Any:
    jobs = [{"spec_text": text or JOB.replace("TENANT", tenant), "source": f"j{i}.yaml"} for i in range(count)]
    return api.post("/v1/jobs/batch", headers={"Authorization": who}, json={"jobs": jobs})


def _limit(api: TestClient, clock: Clock, tenant: str, **submit: float) -> dict[str, Any]:
    answer = api.put(f"/v1/tenants/{tenant}", headers={"Authorization": ROOT}, json={"submit": submit})
    assert answer.status_code == 200, answer.text
    clock.now += 10  # past the gate's limits refresh
    return answer.json()


def test_over_the_pending_limit_is_403_in_sbatchs_words_and_other_tenants_go_on(
    api: TestClient, clock: Clock, metrics: ApiMetrics
) -> None:
    view = _limit(api, clock, "tenant-a", max_pending=3)
    assert view["submit_limits"] == {"max_pending": 3, "sources": {"max_pending": "metasched"}}
    assert _batch(api, ALICE, "tenant-a", 3).status_code == 201
    refused = _batch(api, ALICE, "tenant-a", 1)
    assert refused.status_code == 403, refused.text
    body = refused.json()
    assert body["error"] == "SubmitLimitExceeded" and body["reason"] == "tenant_pending"
    assert body["message"].startswith("Job violates accounting/QOS policy (job submit limit, user's size and/or time")
    assert _batch(api, BOB, "tenant-b", 5).status_code == 201
    # a tenant at its limit is refused before its job files are even read
    assert _batch(api, ALICE, "tenant-a", 2, text="not: [a job").status_code == 403
    assert metrics.registry.get_sample_value(
        "metasched_submit_refusals_total", {"tenant": "tenant-a", "reason": "tenant_pending"}
    ) == 2


def test_over_the_rate_is_429_with_retry_after(api: TestClient, clock: Clock) -> None:
    _limit(api, clock, "tenant-a", rate=0.5, burst=2)
    assert _batch(api, ALICE, "tenant-a", 2).status_code == 201
    refused = api.post("/v1/jobs", headers={"Authorization": ALICE}, json={"spec_text": JOB.replace("TENANT", "tenant-a")})
    assert refused.status_code == 429, refused.text
    assert refused.headers["Retry-After"] == "2" and refused.json()["retry_after_s"] == pytest.approx(2.0)
    assert refused.json()["error"] == "SubmitRateLimited"
    clock.now += 2
    assert api.post("/v1/jobs", headers={"Authorization": ALICE},
                    json={"spec_text": JOB.replace("TENANT", "tenant-a")}).status_code == 201  # fmt: skip


def test_only_admins_set_submit_limits(api: TestClient) -> None:
    answer = api.put("/v1/tenants/tenant-a", headers={"Authorization": ALICE}, json={"submit": {"max_pending": 1}})
    assert answer.status_code == 403 and answer.json()["error"] == "Forbidden"
    bad = api.put("/v1/tenants/tenant-a", headers={"Authorization": ROOT}, json={"submit": {"rate": -1}})
    assert bad.status_code == 400
