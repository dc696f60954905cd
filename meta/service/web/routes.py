"""The web view's routes: the login link (MUNGE-authenticated, under /v1) and the pages (session cookie, under /web).

``RequestGuard`` lets ``/web`` through without a MUNGE credential (a browser has none); every page
checks the session cookie itself, then resolves the caller's rights from Slurm's associations per
request, as the JSON API does. Another tenant's job is 404 here too. Pages are read-only GETs.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from datetime import UTC, datetime
from typing import Annotated, Any
from urllib.parse import quote

from fastapi import APIRouter, Path, Query, Request
from fastapi.responses import HTMLResponse, JSONResponse
from sqlalchemy import select

from meta.model.errors import Forbidden, InvalidRequest, MetaschedError
from meta.model.spec import SpecError
from meta.service import plan_reports
from meta.service.http_errors import describe
from meta.service.op_routes import api_route
from meta.service.operations import Operations
from meta.service.web import data, pages
from meta.service.web.auth import COOKIE, WebAuth
from meta.service.web.render import page
from meta.service.web.tokens import BadToken
from meta.store import audit
from meta.store.models import Job, Tenant
from tenants.auth import Identity

router = APIRouter()
SECURITY_HEADERS = {
    # no script, no framing, no form posts, nothing fetched but the page itself
    "Content-Security-Policy": "default-src 'none'; style-src 'unsafe-inline'; img-src data:; "
    "frame-ancestors 'none'; form-action 'none'; base-uri 'none'",
    "X-Content-Type-Options": "nosniff",
    "X-Frame-Options": "DENY",
    "Referrer-Policy": "no-referrer",  # a login link's token never leaves in a Referer
    "Cache-Control": "no-store",
}
MAX_REF = 128
AUDIT_TAIL = 100
JOBS_SHOWN = 200
HISTORY_ROWS = 10
# saved plan reports on the Capacity page, newest first, each with its plots (about 40-150 KiB of PNG each)
CAPACITY_SHOWN = {"calibrate": 1, "what-if": 10, "need": 5}


def _slurm_id(status: dict[str, Any], attempt_id: str) -> str:
    """_slurm_id is an attempt's Slurm job id, or a placeholder before it was launched."""
    for task in status["task_list"]:
        for attempt in task["attempts"]:
            if attempt["id"] == attempt_id:
                return attempt["slurm_job_id"] or "<slurm id>"
    return "<slurm id>"


@api_route(router, "web_link")
def web_link(request: Request) -> JSONResponse:
    """web_link is a login link for the MUNGE-authenticated caller (``metasched web``): single use, 10 minutes."""
    identity: Identity = request.state.identity
    context = request.app.state.context
    context.principal_for(identity, None)  # a caller the API would refuse gets no link either
    auth: WebAuth = request.app.state.web_auth
    base = auth.settings.base_url
    if not base:
        raise InvalidRequest("the web view needs a TCP listener: start `metasched serve` with --api-listen HOST:PORT")
    token, expires = auth.issue_link(identity)
    path = f"/web/login?t={quote(token, safe='')}"
    return JSONResponse({"url": base.rstrip("/") + path, "path": path, "user": identity.user,
                         "expires_at": datetime.fromtimestamp(expires, UTC).isoformat()})  # fmt: skip


def _html(text: str, status: int = 200) -> HTMLResponse:
    return HTMLResponse(text, status_code=status, headers=SECURITY_HEADERS)


def _viewer(request: Request) -> tuple[Operations, Identity]:
    """_viewer is the signed-in caller's Operations and Identity (BadToken without a valid session cookie)."""
    auth: WebAuth = request.app.state.web_auth
    identity = auth.identity_of(request.cookies.get(COOKIE))
    context = request.app.state.context
    principal = context.principal_for(identity, None)
    return Operations(context.service, principal, secrets_root=context.secrets_root), identity


def _serve(request: Request, title: str, active: str, build: Callable[[Operations], str], refresh_s: int | None = 30) -> HTMLResponse:
    """_serve renders one page for the signed-in caller, or the page that says why not (401, 403, 404, ...)."""
    started = time.perf_counter()
    try:
        ops, identity = _viewer(request)
    except BadToken:
        return _html(page("Sign in", pages.message_body("You are not signed in (or your session ended).",
                                                        pages.SIGN_IN_HINT)), 401)  # fmt: skip
    except (MetaschedError, SpecError) as exc:
        status, body = describe(exc)
        return _html(page("Refused", pages.message_body(body["message"])), status)
    try:
        body = build(ops)
        status = 200
    except (MetaschedError, SpecError) as exc:
        status, answer = describe(exc)
        title, body = ("Not found" if status == 404 else "Refused"), pages.message_body(answer["message"])
    html = page(title, body, user=identity.user, active=active, admin=ops.principal.is_admin, refresh_s=refresh_s,
                capacity=_plans(ops))
    response = _html(html, status)
    response.headers["Server-Timing"] = f"render;dur={(time.perf_counter() - started) * 1000:.1f}"
    return response


def _plans(ops: Operations) -> bool:
    """_plans tells whether the caller may open the Capacity page: an admin or a coordinator of a tenant."""
    principal = ops.principal
    return principal.is_admin or any(principal.may_coordinate(tenant) for tenant in principal.coordinates)


def _tenant_names(ops: Operations) -> list[str]:
    with ops.service.db.session() as session:
        return list(session.scalars(select(Tenant.name).order_by(Tenant.name)))


@router.get("/web/login", include_in_schema=False)
def login(request: Request, t: Annotated[str, Query(max_length=2_048)] = "") -> HTMLResponse:
    """login redeems a login link once and sets the session cookie; the page then moves on to the cluster map."""
    auth: WebAuth = request.app.state.web_auth
    try:
        claims = auth.redeem(request.app.state.context.service.db, t)
    except BadToken as exc:
        return _html(page("Sign in", pages.message_body(f"This login link cannot be used: {exc}.", pages.SIGN_IN_HINT)), 401)
    # a page, not a redirect: the next request starts from this origin, so the SameSite=Strict cookie goes with it
    html = page("Signed in", pages.message_body(f"Signed in as {claims.user}.", '<a href="/web/">Open the cluster map</a>'),
                refresh_s=None).replace("<head>", '<head><meta http-equiv="refresh" content="0; url=/web/">', 1)
    response = _html(html)
    response.set_cookie(COOKIE, auth.session_token(claims), max_age=int(auth.settings.session_ttl_s), path="/web",
                        httponly=True, samesite="strict", secure=_over_tls(request, auth))  # fmt: skip
    return response


def _over_tls(request: Request, auth: WebAuth) -> bool:
    """_over_tls: the browser reached us over https (directly or through a proxy uvicorn trusts), or says so."""
    return request.url.scheme == "https" or (auth.settings.base_url or "").startswith("https:")


@router.get("/web/logout", include_in_schema=False)
def logout(request: Request) -> HTMLResponse:
    """logout deletes the session on the server (a copied cookie stops working too) and in this browser."""
    auth: WebAuth = request.app.state.web_auth
    ended = auth.end_session(request.cookies.get(COOKIE))
    if ended is not None:
        with request.app.state.context.service.db.session() as session:
            audit.record(session, ended.user, "web.logout", "session", uid=ended.uid)  # never the cookie
    response = _html(page("Signed out", pages.message_body("You are signed out.", pages.SIGN_IN_HINT)))
    response.delete_cookie(COOKIE, path="/web", httponly=True, samesite="strict", secure=_over_tls(request, auth))
    return response


@router.get("/web", include_in_schema=False)
@router.get("/web/", include_in_schema=False)
def cluster(request: Request) -> HTMLResponse:
    """cluster is the cluster map: nodes by GPU type and switch, who holds what, free and stranded GPUs."""

    def build(ops: Operations) -> str:
        with ops.service.db.session() as session:
            cmap = data.cluster_map(session, ops.principal.visible_tenants())
        return pages.cluster_body(cmap, _tenant_names(ops))

    return _serve(request, "Cluster map", "cluster", build)


@router.get("/web/clusters", include_in_schema=False)
def clusters(request: Request) -> HTMLResponse:
    """clusters is one row per Slurm cluster: drained or not, nodes up and down, GPUs total and free, live attempts."""

    def build(ops: Operations) -> str:
        with ops.service.db.session() as session:
            found = data.cluster_table(session)
        return pages.clusters_body(found, ops.principal.is_admin)

    return _serve(request, "Slurm clusters", "clusters", build)


@router.get("/web/queues", include_in_schema=False)
def queues(request: Request) -> HTMLResponse:
    """queues is every tenant's waiting and running work with fair share against usage, and their history."""

    def build(ops: Operations) -> str:
        with ops.service.db.session() as session:
            rows = data.tenant_rows(session, ops.principal.visible_tenants())
            hist = data.history(session)
        return pages.queues_body(rows, hist, [r.name for r in rows])

    return _serve(request, "Queues by tenant", "queues", build)


@router.get("/web/jobs", include_in_schema=False)
def jobs(request: Request) -> HTMLResponse:
    """jobs lists the newest jobs the caller may see."""
    return _serve(request, "Jobs", "jobs", lambda ops: pages.jobs_body(ops.list_jobs(limit=JOBS_SHOWN)))


@router.get("/web/jobs/{ref}", include_in_schema=False)
def job(request: Request, ref: Annotated[str, Path(min_length=1, max_length=MAX_REF)]) -> HTMLResponse:
    """job is one job's page (another tenant's job is 404, as in the API)."""

    def build(ops: Operations) -> str:
        status = ops.status(ref)
        explain = ops.explain(ref)
        with ops.service.db.session() as session:
            row = session.get(Job, status["id"])
            assert row is not None  # status found it
            log_dir = request.app.state.web_auth.settings.log_dir
            logs = {a["id"]: data.log_path(row, a, log_dir, ops.daemon_uid)
                    for task in status["task_list"] for a in task["attempts"]}  # fmt: skip
            ahead = data.waiting_ahead(session, row.tenant, row.submitted_at)
            spec_logs = data.sbatch_log_patterns(status)
        history = ops.explain_history(ref, limit=HISTORY_ROWS)
        if spec_logs:
            logs = {a: spec_logs.replace("%j", _slurm_id(status, a)) for a in logs}
        return pages.job_body(status, explain, logs, ahead, history, ops.principal.visible_tenants())

    return _serve(request, f"Job {ref}", "jobs", build)


@router.get("/web/admin", include_in_schema=False)
def admin(request: Request) -> HTMLResponse:
    """admin is every tenant's settings and the audit tail (admins only; others get 403)."""

    def build(ops: Operations) -> str:
        if not ops.principal.is_admin:
            raise Forbidden("this page is for admins (Slurm AdminLevel Operator or Administrator)")
        with ops.service.db.session() as session:
            rows = data.tenant_rows(session, None)
        return pages.admin_body(rows, ops.audit(limit=AUDIT_TAIL))

    return _serve(request, "Admin", "admin", build)


@router.get("/web/capacity", include_in_schema=False)
def capacity(request: Request) -> HTMLResponse:
    """capacity is the latest saved calibration, scenarios and node searches with their plots (admins whole; a
    tenant's coordinator its own tenant's rows and the cluster-wide figures; others 403, as the API)."""

    def build(ops: Operations) -> str:
        scope = plan_reports.scope_of(ops.principal)
        found = plan_reports.latest(ops.service.db, ops.principal, CAPACITY_SHOWN)
        return pages.capacity_body(found, "all" if scope is None else sorted(scope))

    return _serve(request, "Capacity", "capacity", build, refresh_s=None)


@router.get("/web/capacity/{report_id}", include_in_schema=False)
def capacity_report(request: Request, report_id: Annotated[int, Path(ge=1, le=2**31 - 1)]) -> HTMLResponse:
    """capacity_report is one saved plan report with its plots, scoped as the Capacity page."""

    def build(ops: Operations) -> str:
        return pages.report_block(ops.plan_report(report_id, plots=True))

    return _serve(request, f"Plan report {report_id}", "capacity", build, refresh_s=None)
