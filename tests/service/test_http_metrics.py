"""The API's metrics: requests by route template (never a raw path or job id) and status, latency, auth failures."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest
from prometheus_client import CollectorRegistry

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from fastapi.testclient import TestClient

from meta.service.api import Service
from meta.service.http import create_app
from meta.service.http_metrics import ApiMetrics
from tests.api_support import ALICE, ROOT, TestAuthenticator, principal_for
from tests.conftest import sqlite_database


@pytest.fixture
def counted(tmp_path: Path) -> Iterator[tuple[TestClient, CollectorRegistry]]:
    """counted is the app on a SQLite store with its metrics on a fresh registry."""
    service = Service(sqlite_database(tmp_path / "metrics.sqlite"))
    registry = CollectorRegistry()
    app = create_app(service, TestAuthenticator(), principal_for, metrics=ApiMetrics(registry))
    with TestClient(app) as client:
        yield client, registry
    service.db.dispose()


def _value(registry: CollectorRegistry, name: str, **labels: str) -> float:
    value = registry.get_sample_value(name, labels)
    return 0.0 if value is None else value


def test_requests_are_counted_by_route_template_and_status(
    counted: tuple[TestClient, CollectorRegistry],
) -> None:
    client, registry = counted
    assert client.get("/healthz").status_code == 200
    for ref in ("j123", "j456"):
        assert client.get(f"/v1/jobs/{ref}", headers={"Authorization": ALICE}).status_code == 404
    assert client.get("/nowhere", headers={"Authorization": ROOT}).status_code == 404
    assert _value(registry, "metasched_api_requests_total", method="GET", route="/healthz", status="2xx") == 1
    assert (
        _value(registry, "metasched_api_requests_total", method="GET", route="/v1/jobs/{ref}", status="4xx")
        == 2
    )
    assert (
        _value(registry, "metasched_api_requests_total", method="GET", route="unmatched", status="4xx") == 1
    )
    assert _value(registry, "metasched_api_request_seconds_count", method="GET", route="/v1/jobs/{ref}") == 2
    labels = {s.labels.get("route") for m in registry.collect() for s in m.samples if "route" in s.labels}
    assert not any("j123" in (route or "") for route in labels)  # job ids never become label values


def test_refused_credentials_are_counted_by_reason_and_route(
    counted: tuple[TestClient, CollectorRegistry],
) -> None:
    client, registry = counted
    assert (
        _value(registry, "metasched_api_auth_failures_total", reason="missing") == 0
    )  # exists before any failure
    assert client.get("/v1/jobs").status_code == 401
    assert client.get("/v1/jobs/j9", headers={"Authorization": "Basic x"}).status_code == 401
    assert _value(registry, "metasched_api_auth_failures_total", reason="missing") == 1
    assert _value(registry, "metasched_api_auth_failures_total", reason="malformed") == 1
    assert _value(registry, "metasched_api_requests_total", method="GET", route="/v1/jobs", status="4xx") == 1
    assert (
        _value(registry, "metasched_api_requests_total", method="GET", route="/v1/jobs/{ref}", status="4xx")
        == 1
    )


def test_a_wrong_method_is_labelled_by_the_path_it_reached(
    counted: tuple[TestClient, CollectorRegistry],
) -> None:
    client, registry = counted
    assert client.delete("/v1/jobs/j1", headers={"Authorization": ROOT}).status_code == 405
    assert (
        _value(
            registry, "metasched_api_requests_total", method="DELETE", route="/v1/jobs/{ref}", status="4xx"
        )
        == 1
    )


def _series(registry: CollectorRegistry) -> int:
    return sum(len(metric.samples) for metric in registry.collect())


def test_invented_methods_add_no_series(counted: tuple[TestClient, CollectorRegistry]) -> None:
    """S8: 10,000 invented method names (unauthenticated) are one ``other`` label, not 10,000 series."""
    client, registry = counted
    client.request("BREWX", "/v1/jobs")
    client.request("BREWY", "/nowhere")
    before = _series(registry)  # samples: counters, histogram buckets, ``_created``
    for i in range(10_000):
        client.request(f"BREW{i}", "/v1/jobs" if i % 2 else f"/nowhere/{i}")
    assert _series(registry) == before  # the same two label sets (``other`` on a route and on ``unmatched``)
    assert (
        _value(registry, "metasched_api_requests_total", method="other", route="/v1/jobs", status="4xx")
        == 5_001
    )
    assert (
        _value(registry, "metasched_api_requests_total", method="other", route="unmatched", status="4xx")
        == 5_001
    )
    methods = {s.labels.get("method") for m in registry.collect() for s in m.samples if "method" in s.labels}
    assert methods == {"other"}
