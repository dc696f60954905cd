"""Where the API's refusals meet the audit: refused credentials (per peer) and authorization refusals (per caller).

``RequestGuard`` reports each refused credential with the request's scope; the API's error
handler reports each ``Forbidden`` or ``InvalidAccount`` answer. Both go through the service's
``RefusalAudit`` (a few rows in full per group and window, then one counted summary), so every
refusal is on the record and no caller can flood it (issue 22, S9 and S12). Job-side refusals
and refused submits are recorded where they happen (``jobside.audited``, the submit gate).
"""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any

from starlette.routing import BaseRoute

from meta.model.errors import Forbidden
from meta.model.limits import clip
from meta.service.http_guard import Scope
from meta.service.http_metrics import ApiMetrics, method_label, route_template
from meta.service.refusal_audit import Refusal, RefusalAudit, is_audited, mark_audited
from meta.service.request_gate import PEER
from meta.service.submit_gate import SubmitRefused
from tenants.identity import InvalidAccount

REQUEST_ACTION = "request.refused"
UNKNOWN_PEER = "peer:unknown"


def peer_of(scope: Scope) -> str:
    """peer_of names who sent a request without trusting it: the connection's peer, else its address."""
    named = scope.get(PEER)  # the connection layer's ``uid:N`` (SO_PEERCRED) or ``ip:ADDR``
    if isinstance(named, str) and named:
        return named
    client = scope.get("client")
    if isinstance(client, list | tuple) and client and client[0]:
        return f"ip:{client[0]}"
    return UNKNOWN_PEER  # a Unix socket whose connection layer did not say


def auth_failure_hook(
    metrics: ApiMetrics | None, refusals: RefusalAudit, routes: Iterable[BaseRoute]
) -> Callable[[str, Scope], None]:
    """auth_failure_hook counts a refused credential (metrics by reason) and audits it by peer, reason and route."""
    templates = list(routes)

    def refused(code: str, scope: Scope) -> None:
        if metrics is not None:
            metrics.auth_failed(code)
        route = f"{method_label(scope.get('method'))} {route_template(templates, scope)}"  # a template, not the path
        refusals.auth_failed(peer_of(scope), code, route)

    return refused


def is_authorization_refusal(exc: BaseException) -> bool:
    """is_authorization_refusal tells whether ``exc`` refuses the caller a right (and is not recorded elsewhere)."""
    if isinstance(exc, SubmitRefused) or is_audited(exc):
        return False  # the submit gate and the job-side calls audit their own
    return isinstance(exc, Forbidden | InvalidAccount)


def audit_request_refusal(
    refusals: RefusalAudit | None, scope: Scope, state: Any, exc: BaseException
) -> None:
    """audit_request_refusal records one authorization refusal of an authenticated caller (or a web session)."""
    if refusals is None or not is_authorization_refusal(exc):
        return
    identity = getattr(state, "identity", None)
    actor = identity.user if identity is not None else "web"
    route = scope.get("route")
    operation = str(getattr(route, "name", None) or "unmatched")
    detail = {"uid": getattr(identity, "uid", None), "operation": operation, "message": clip(str(exc), 300)}
    refusals.refused(Refusal(actor, REQUEST_ACTION, operation, type(exc).__name__, detail=detail))
    mark_audited(exc)
