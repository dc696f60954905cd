"""The API's Prometheus metrics: requests by route template and status, latency, authentication failures, refused submits.

``ApiMetrics`` registers its families on the registry the daemon serves (``metasched serve``
passes the one of ``meta.cycle.metrics.Metrics``). Routes are labelled by their template
(``/v1/jobs/{ref}``), never by the raw path, so job ids never become label values; a path no
route matches is ``unmatched``. A request refused before routing (no credential, too large) is
labelled with the route its path would have reached. Every label comes from a fixed set, so no
request can add series (issue 22, S8): a method outside ``METHODS`` is ``other``, a status is its
class (``2xx`` ... ``5xx``, else ``other``).
"""

from __future__ import annotations

import time
from collections.abc import Callable, Iterable
from typing import Any

from prometheus_client import CollectorRegistry, Counter, Gauge, Histogram
from starlette.routing import BaseRoute, Match

from meta.service.http_guard import ASGIApp, Message, Receive, Scope, Send

UNMATCHED = "unmatched"
OTHER = "other"
# the methods a label may name: any other word a client sends is ``other`` (a client chooses it freely)
METHODS = frozenset({"GET", "HEAD", "POST", "PUT", "PATCH", "DELETE", "OPTIONS"})
STATUS_CLASSES = ("1xx", "2xx", "3xx", "4xx", "5xx")
_LATENCY_BUCKETS = (0.005, 0.01, 0.025, 0.05, 0.1, 0.25, 0.5, 1, 2.5, 5, 10, float("inf"))
# what RequestGuard reports besides the authenticators' own codes
AUTH_FAILURE_CODES = ("missing", "malformed", "invalid", "expired", "rewound", "replayed", "unauthorized",
                      "wrong_request", "munge_unavailable")  # fmt: skip


class ApiMetrics:
    """ApiMetrics holds the API's request counter, latency histogram and authentication-failure counter."""

    def __init__(self, registry: CollectorRegistry | None = None) -> None:
        self.registry = registry or CollectorRegistry()
        r = self.registry
        self.requests = Counter(
            "metasched_api_requests_total", "API requests by method, route template and status class",
            ["method", "route", "status"], registry=r,
        )  # fmt: skip
        self.latency = Histogram(
            "metasched_api_request_seconds", "API request latency by method and route template",
            ["method", "route"], buckets=_LATENCY_BUCKETS, registry=r,
        )  # fmt: skip
        self.auth_failures = Counter(
            "metasched_api_auth_failures_total", "API requests refused for their credential, by reason", ["reason"],
            registry=r,
        )  # fmt: skip
        for code in AUTH_FAILURE_CODES:
            self.auth_failures.labels(code)
        self._failing_peers: Callable[[], int] = lambda: 0
        self.auth_failure_peers = Gauge(
            "metasched_api_auth_failure_peers", "Peers (Unix users or addresses) with a refused credential in the "
            "current audit window (each peer's count is in the audit's summary rows)", registry=r,
        )  # fmt: skip
        self.auth_failure_peers.set_function(lambda: self._failing_peers())
        self.submit_refusals = Counter(
            "metasched_submit_refusals_total", "Submits refused by a tenant's submit limits, by tenant and reason "
            "(rate, tenant_pending, user_pending)", ["tenant", "reason"], registry=r,
        )  # fmt: skip

    def auth_failed(self, code: str) -> None:
        """auth_failed counts one refused credential (``code`` outside the known words counts as ``invalid``)."""
        self.auth_failures.labels(code if code in AUTH_FAILURE_CODES else "invalid").inc()

    def count_auth_failure_peers(self, count: Callable[[], int]) -> None:
        """count_auth_failure_peers tells the gauge how to count the peers refused a credential (the refusal audit)."""
        self._failing_peers = count

    def submit_refused(self, tenant: str, reason: str) -> None:
        """submit_refused counts one submit refused by the tenant's limits (the submit gate's ``on_refusal``)."""
        self.submit_refusals.labels(tenant, reason).inc()


def route_template(routes: Iterable[BaseRoute], scope: Scope) -> str:
    """route_template is the path template of the route ``scope`` reaches (``unmatched`` when none does)."""
    partial = None
    for route in routes:
        match, _ = route.matches(scope)
        if match == Match.FULL:
            return str(getattr(route, "path", UNMATCHED))
        if match == Match.PARTIAL and partial is None:
            partial = route  # the path matches but not the method: label it by that path
    return str(getattr(partial, "path", UNMATCHED)) if partial is not None else UNMATCHED


class MetricsMiddleware:
    """MetricsMiddleware times every HTTP request and counts it by method, route template and status."""

    def __init__(self, app: ASGIApp, metrics: ApiMetrics, routes: Iterable[BaseRoute]) -> None:
        self.app = app
        self.metrics = metrics
        self.routes = list(routes)

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """__call__ is the ASGI entry point."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        started = time.perf_counter()
        status = {"code": 500}  # an app that raises before answering: uvicorn answers 500

        async def send_and_see(message: Message) -> None:
            if message["type"] == "http.response.start":
                status["code"] = int(message["status"])
            await send(message)

        try:
            await self.app(scope, receive, send_and_see)
        finally:
            route = _route_of(scope, self.routes)
            method = method_label(scope.get("method"))
            self.metrics.requests.labels(method, route, status_class(status["code"])).inc()
            self.metrics.latency.labels(method, route).observe(time.perf_counter() - started)


def method_label(method: object) -> str:
    """method_label is the request's method when it is a standard one, else ``other``."""
    word = str(method or "").upper()
    return word if word in METHODS else OTHER


def status_class(code: int) -> str:
    """status_class is ``2xx`` for 200-299 and so on; a code outside 100-599 is ``other``."""
    return f"{code // 100}xx" if 100 <= code <= 599 else OTHER


def _route_of(scope: Scope, routes: list[BaseRoute]) -> str:
    """_route_of is the template Starlette routed to, else the one the path would reach."""
    routed: Any = scope.get("route")
    path = getattr(routed, "path", None)
    return str(path) if path is not None else route_template(routes, scope)
