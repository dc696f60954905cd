"""The API service: versioned JSON routes over ``Operations``, behind ``RequestGuard`` (docs/identity.md §2).

``create_app`` takes the authenticator and the principal resolver as arguments: production
passes MUNGE and Slurm's associations (``meta/serve/api_start.py``), tests pass their own. Every
route answers JSON; errors are ``{"error", "message"}`` with the status codes of
``meta.service.http_errors``. Bodies and query values are bounded. Each route's path, method and
status come from the operation table (``meta.model.api_operations``, registered by ``api_route``).
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass
from importlib import metadata
from pathlib import Path as FsPath
from typing import Annotated, Any

from fastapi import APIRouter, Depends, FastAPI, Header, Path, Query, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import JSONResponse
from pydantic import BaseModel, ConfigDict, Field
from sqlalchemy.exc import SQLAlchemyError
from starlette.concurrency import run_in_threadpool
from starlette.exceptions import HTTPException as StarletteHTTPException

from meta.model.api_operations import MAX_QUEUE_JOB_IDS
from meta.model.errors import InvalidRequest, MetaschedError
from meta.model.limits import MAX_DURATION_S, clip
from meta.model.spec import SpecError
from meta.model.states import IllegalTransition
from meta.service import refusal_audit
from meta.service.api import MAX_BATCH_JOBS, Service
from meta.service.artifacts import DEFAULT_NODE_MTBF_S
from meta.service.decision_history import MAX_LIMIT as MAX_HISTORY
from meta.service.http_errors import describe, error_body, error_headers
from meta.service.http_guard import DEFAULT_MAX_BODY_BYTES, ASGIApp, RequestGuard
from meta.service.http_metrics import ApiMetrics, MetricsMiddleware
from meta.service.op_routes import api_route, unmatched
from meta.service.operations import MAX_LIST, Operations
from meta.service.queue_view import MAX_QUEUE_ROWS
from meta.service.refusal_audit import AUTH_ACTION, RefusalAudit
from meta.service.refusal_hooks import audit_request_refusal, auth_failure_hook, is_authorization_refusal
from meta.service.web.auth import WebAuth, WebSettings
from meta.service.web.routes import router as web_router
from meta.store.plan_reports import MAX_LIST as MAX_PLAN_LIST
from tenants.auth import Authenticator, Identity, Unauthenticated
from tenants.identity import Principal
from tenants.quotas import MAX_TENANT_CLUSTERS
from tenants.secrets import DEFAULT_ROOT

PrincipalResolver = Callable[[Identity, str | None], Principal]
"""PrincipalResolver maps (identity, tenant asked for or None) to the Principal the service authorizes."""

MAX_NAME = 1_024  # path segments and filters: a safety bound; names are checked in full further in
MAX_TEXT = 4_096
MAX_QUOTA_ITEMS = 64

Ref = Annotated[str, Path(min_length=1, max_length=MAX_NAME, description="short job id (j...) or job UUID")]
Name = Annotated[str, Path(min_length=1, max_length=MAX_NAME)]
AsTenant = Annotated[
    str | None,
    Query(max_length=MAX_NAME, description="act for this one of the caller's tenants (the CLI's --tenant)"),
]


class _Body(BaseModel):
    model_config = ConfigDict(extra="forbid")


# numbers a caller sends are finite and fit a store column: NaN, Infinity (JSON's 1e400) and 10**400
# are a 400 here, never a 500 further on (issue 22, S13)
MAX_WHOLE = 2**62
MAX_TASK_INDEX = 2**31 - 1
FiniteNumber = Annotated[float, Field(allow_inf_nan=False, ge=-1e15, le=1e15)]
Token = Annotated[int, Field(ge=0, le=MAX_WHOLE)]


class SubmitRequest(_Body):
    """SubmitRequest is a job to submit: a job file's text, or a spec already parsed (msbatch)."""

    spec_text: str | None = Field(default=None, description="the job file (YAML or JSON) as text")
    spec: dict[str, Any] | None = Field(default=None, description="the job spec as a mapping (msbatch)")
    source: str | None = Field(default=None, max_length=MAX_TEXT, description="file name, for error messages")
    key: str | None = Field(default=None, max_length=MAX_TEXT, description="idempotency key")
    tenant: str | None = Field(default=None, max_length=MAX_NAME, description="act for this tenant")
    submit_dir: str | None = Field(
        default=None, max_length=2 * MAX_TEXT,  # a safety bound; the service counts the path's bytes description="the caller's working folder (absolute): the job runs there"
    )


class BatchFile(_Body):
    """BatchFile is one job file of a batch."""

    spec_text: str = Field(description="the job file (YAML or JSON) as text")
    source: str | None = Field(default=None, max_length=MAX_TEXT, description="file name, for error messages")


class BatchRequest(_Body):
    """BatchRequest is several job files submitted in one transaction (all or none)."""

    jobs: list[BatchFile] = Field(min_length=1, max_length=MAX_BATCH_JOBS)
    key: str | None = Field(default=None, max_length=MAX_TEXT, description="idempotency key of the batch (job i: KEY/i)")
    tenant: str | None = Field(default=None, max_length=MAX_NAME, description="act for this tenant")
    submit_dir: str | None = Field(default=None, max_length=2 * MAX_TEXT, description="the caller's working folder")


class RetryRequest(_Body):
    """RetryRequest names one task to retry, or none for every failed or cancelled task."""

    task: int | None = Field(default=None, ge=0, le=MAX_TASK_INDEX)


class TenantUpdate(_Body):
    """TenantUpdate sets guaranteed GPUs (``TYPE=COUNT`` items; omitted: unchanged); weight and limits are refused."""

    weight: FiniteNumber | None = None
    guaranteed: list[Annotated[str, Field(max_length=MAX_NAME)]] | None = Field(default=None, max_length=MAX_QUOTA_ITEMS)
    limits: list[Annotated[str, Field(max_length=MAX_NAME)]] | None = Field(default=None, max_length=MAX_QUOTA_ITEMS)
    submit: dict[Annotated[str, Field(max_length=64)], FiniteNumber | None] | None = Field(
        default=None, max_length=8,
        description="submit limits: max_pending, max_pending_per_user, rate, burst (null: unset)",
    )  # fmt: skip
    priority_classes: list[Annotated[str, Field(max_length=MAX_NAME)]] | None = Field(
        default=None, max_length=16,
        description="priority classes above their job kind's that members may ask for ([]: none; omitted: unchanged)",
    )  # fmt: skip
    clusters: list[Annotated[str, Field(max_length=64)]] | None = Field(
        default=None, max_length=MAX_TENANT_CLUSTERS,
        description="the Slurm clusters the tenant's work may run on ([]: any; omitted: unchanged)",
    )  # fmt: skip


class SecretValue(_Body):
    """SecretValue is one secret's value (never stored by metasched, never echoed)."""

    value: str


class SecretUsers(_Body):
    """SecretUsers names the users whose jobs may read a secret, or gives it back to every member (one of the two)."""

    users: list[Annotated[str, Field(max_length=64)]] | None = Field(default=None, max_length=256)
    everyone: bool = False


SECRET_FIELD = Field(
    default=None, max_length=512, description="the attempt's secret (the job's METASCHED_ATTEMPT_SECRET)"
)
SECRET_HEADER = "X-Metasched-Attempt-Secret"


class CommitRequest(_Body):
    """CommitRequest is a partition attempt's output manifest, fencing token and attempt secret."""

    token: Token
    manifest: dict[str, Any]
    secret: str | None = SECRET_FIELD


class CheckpointReport(_Body):
    """CheckpointReport is one checkpoint of a running training attempt."""

    token: Token
    step: int = Field(ge=0, le=MAX_WHOLE)
    path: str = Field(min_length=1, max_length=MAX_TEXT)
    size_bytes: int | None = Field(default=None, ge=0, le=MAX_WHOLE)
    duration_s: float | None = Field(default=None, ge=0, le=MAX_DURATION_S, allow_inf_nan=False)
    secret: str | None = SECRET_FIELD


class AuditPruneRequest(_Body):
    """AuditPruneRequest is an admin's prune: lines older than an age (``90d``) or an ISO time, confirmed."""

    before: str = Field(min_length=1, max_length=64, description="an age such as 90d, or an ISO time")
    confirm: bool = Field(default=False, description="must be true: the lines are deleted for good")


class DrainRequest(_Body):
    """DrainRequest is an admin's drain of a cluster: why (optional; the store bounds it to 200 printable characters)."""

    reason: str | None = Field(default=None, max_length=MAX_TEXT, description="why the cluster is drained")


class ErrorBody(BaseModel):
    """ErrorBody is every error answer: the error's type and a one-line message."""

    error: str
    message: str


_ERRORS: dict[int | str, dict[str, Any]] = {
    code: {"model": ErrorBody, "description": what}
    for code, what in (
        (400, "invalid request or job spec"),
        (401, "no valid credential"),
        (403, "forbidden, over the tenant's pending-job limit (SubmitLimitExceeded), or a priority class or "
              "deadline without the right (PriorityNotAllowed)"),
        (404, "not found (also another tenant's job)"),
        (409, "conflict with stored state"),
        (413, "request body too large"),
        (422, "unschedulable on this cluster"),
        (429, "over the tenant's submit rate (SubmitRateLimited; Retry-After)"),
    )
}


@dataclass(frozen=True)
class ApiContext:
    """ApiContext is what every route needs besides the request: the service and how to authorize."""

    service: Service
    principal_for: PrincipalResolver
    secrets_root: str | FsPath
    refusals: RefusalAudit | None = None  # refusals on the record at a bounded rate (issue 22, S9)


def operations_for(request: Request, tenant: str | None) -> Operations:
    """operations_for is the authenticated caller's Operations, acting for ``tenant`` when given."""
    context: ApiContext = request.app.state.context
    identity: Identity = request.state.identity
    principal = context.principal_for(identity, tenant or None)
    return Operations(context.service, principal, secrets_root=context.secrets_root, refusals=context.refusals)


def caller(request: Request, as_tenant: AsTenant = None) -> Operations:
    """caller is the route dependency: the caller's Operations (``?as_tenant=`` picks one of its tenants)."""
    return operations_for(request, as_tenant)


def job_caller(request: Request, as_tenant: AsTenant = None) -> Operations:
    """job_caller is the caller of a job-side route: the attempt decides the tenant, so ``as_tenant`` changes nothing."""
    return operations_for(request, None)


Ops = Annotated[Operations, Depends(caller)]
JobOps = Annotated[Operations, Depends(job_caller)]
router = APIRouter()


def create_app(
    service: Service,
    authenticator: Authenticator,
    principal_for: PrincipalResolver,
    *,
    secrets_root: str | FsPath = DEFAULT_ROOT,
    max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
    metrics: ApiMetrics | None = None,
    web: WebSettings | None = None,
    refusals: RefusalAudit | None = None,
) -> ASGIApp:
    """create_app builds the API over ``service``: every request bounded, authenticated, then routed (and counted).

    ``web``: the web view's key and address (None: a random key, and no login links until a base URL is set).
    ``refusals``: where refusals are audited (None: a ``RefusalAudit`` over the service's store, as the environment says).
    """
    refusals = refusals or refusal_audit.from_env(service.db)
    app = FastAPI(
        title="metasched",
        version=_version(),
        description="Tenant-aware meta-scheduler for ML jobs on Slurm. Authenticate with "
        "`Authorization: MUNGE <credential>` bound to the request (docs/identity.md).",
        docs_url=None,
        redoc_url=None,
        openapi_url="/openapi.json",
        responses=_ERRORS,
    )
    app.state.context = ApiContext(service, principal_for, secrets_root, refusals)
    _install_error_handlers(app)
    app.state.web_auth = WebAuth(web or WebSettings.ephemeral())
    if web is not None and web.log_dir and service.log_dir is None:
        service.log_dir = web.log_dir  # metasched status shows where the daemon's own jobs log
    app.include_router(router)
    app.include_router(web_router)
    # every operation of the table served, no /v1 route outside it (the app lists an included router as one entry)
    mismatched = unmatched([*router.routes, *web_router.routes])
    if mismatched:
        raise RuntimeError("API routes and the operation table differ: " + "; ".join(mismatched))
    # the routes' own templates (the app lists the included router as one entry without a path)
    templates = [*router.routes, *web_router.routes, *(r for r in app.routes if hasattr(r, "path"))]
    on_auth_failure = auth_failure_hook(metrics, refusals, templates)
    guarded = RequestGuard(app, authenticator, max_body_bytes=max_body_bytes, on_auth_failure=on_auth_failure)
    if metrics is None:
        return guarded
    metrics.count_auth_failure_peers(lambda: refusals.actors(AUTH_ACTION))
    return MetricsMiddleware(guarded, metrics, templates)


@router.get("/healthz", tags=["service"])
def healthz() -> JSONResponse:
    """healthz answers liveness, without authentication."""
    return JSONResponse({"status": "ok"})

@api_route(router, "whoami")
def whoami(request: Request, ops: Ops) -> JSONResponse:
    """whoami is the authenticated caller: user, uid, gid, tenants and whether it is an admin."""
    identity: Identity = request.state.identity
    return JSONResponse({**ops.whoami(), "user": identity.user, "uid": identity.uid, "gid": identity.gid})

# --- jobs -------------------------------------------------------------------------------

@api_route(router, "submit")
def submit(request: Request, body: SubmitRequest, as_tenant: AsTenant = None) -> JSONResponse:
    """submit stores a job: 201 when created, 200 when the idempotency key names an existing job."""
    ops = operations_for(request, body.tenant or as_tenant)
    if (body.spec_text is None) == (body.spec is None):
        raise InvalidRequest("give exactly one of spec_text (a job file) and spec (a parsed spec)")
    if body.spec_text is not None:
        result = ops.submit_text(body.spec_text, source=body.source or "<job>", key=body.key, submit_dir=body.submit_dir)
    else:
        result = ops.submit_spec(body.spec, key=body.key, submit_dir=body.submit_dir)
    return JSONResponse(result, status_code=201 if result["created"] else 200)

@api_route(router, "submit_batch")
def submit_batch(request: Request, body: BatchRequest, as_tenant: AsTenant = None) -> JSONResponse:
    """submit_batch stores several jobs in one transaction: 201 when any was created, 200 when the key named them all."""
    ops = operations_for(request, body.tenant or as_tenant)
    gate = ops.service.gate
    tenant = body.tenant or as_tenant or ops.principal.default_account
    if gate is not None and tenant:  # a tenant over its limits is refused before its job files are parsed
        gate.precheck(ops.principal.name, tenant, len(body.jobs))
    files = [(item.source or f"<job {i}>", item.spec_text) for i, item in enumerate(body.jobs)]
    results = ops.submit_texts(files, key=body.key, submit_dir=body.submit_dir)
    return JSONResponse({"jobs": results}, status_code=201 if any(r["created"] for r in results) else 200)

@api_route(router, "list_jobs")
def list_jobs(
    ops: Ops,
    tenant: Annotated[str | None, Query(max_length=MAX_NAME)] = None,
    state: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 200,
    after: Annotated[str | None, Query(max_length=64)] = None,
) -> JSONResponse:
    """list_jobs lists the jobs the caller may see, newest first (``after``: the last job of the previous page)."""
    return JSONResponse(ops.list_jobs(tenant=tenant or None, state=state or None, limit=limit, after=after or None))

@api_route(router, "queue")
def queue(
    ops: Ops,
    user: Annotated[list[str] | None, Query(max_length=MAX_NAME)] = None,
    account: Annotated[list[str] | None, Query(max_length=MAX_NAME)] = None,
    partition: Annotated[list[str] | None, Query(max_length=MAX_NAME)] = None,
    state: Annotated[list[str] | None, Query(max_length=64)] = None,
    job: Annotated[list[str] | None, Query(max_length=MAX_QUEUE_JOB_IDS)] = None,
    name: Annotated[list[str] | None, Query(max_length=MAX_NAME)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_QUEUE_ROWS)] = MAX_QUEUE_ROWS,
    any_age: bool = False,
) -> JSONResponse:
    """queue lists the waiting and launched jobs the caller may see, with squeue's fields (msqueue).

    ``any_age``: ended jobs too, however long ago (``metasched list`` fills its columns so).
    """
    return JSONResponse(ops.queue(users=user or (), accounts=account or (), partitions=partition or (),
                                  states=state or (), jobs=job or (), names=name or (), limit=limit,
                                  any_age=any_age))  # fmt: skip

@api_route(router, "status")
def status(ref: Ref, ops: Ops) -> JSONResponse:
    """status is a job's spec, tasks, attempts and recent transitions."""
    return JSONResponse(ops.status(ref))

@api_route(router, "explain")
def explain(ref: Ref, ops: Ops) -> JSONResponse:
    """explain is why each task of a job waits."""
    return JSONResponse(ops.explain(ref))

@api_route(router, "explain_history")
def explain_history(ref: Ref, ops: Ops, limit: Annotated[int, Query(ge=1, le=MAX_HISTORY)] = 20) -> JSONResponse:
    """explain_history is what ran before the job while it waited (the decision log), and what held or preempted it."""
    return JSONResponse(ops.explain_history(ref, limit))

@api_route(router, "outputs")
def outputs(ref: Ref, ops: Ops) -> JSONResponse:
    """outputs is an inference job's committed outputs: one manifest per partition."""
    return JSONResponse(ops.outputs(ref))

@api_route(router, "checkpoints")
def checkpoints(
    ref: Ref, ops: Ops, node_mtbf_s: Annotated[float, Query(gt=0, le=1e10)] = DEFAULT_NODE_MTBF_S
) -> JSONResponse:
    """checkpoints lists a training job's checkpoints and the recommended interval (Young/Daly)."""
    return JSONResponse(ops.checkpoints(ref, node_mtbf_s=node_mtbf_s))

@api_route(router, "cancel")
def cancel(ref: Ref, ops: Ops) -> JSONResponse:
    """cancel stops a job (idempotent) and answers its status."""
    return JSONResponse(ops.cancel(ref))

@api_route(router, "hold")
def hold(ref: Ref, ops: Ops) -> JSONResponse:
    """hold keeps a waiting job from being scheduled (JobHeldUser, or JobHeldAdmin by an admin)."""
    return JSONResponse(ops.hold(ref))

@api_route(router, "release")
def release(ref: Ref, ops: Ops) -> JSONResponse:
    """release lets a held job be scheduled (an admin's hold by admins only)."""
    return JSONResponse(ops.release(ref))

@api_route(router, "retry")
def retry(ref: Ref, ops: Ops, body: RetryRequest | None = None) -> JSONResponse:
    """retry re-queues a job's failed or cancelled tasks (or one task)."""
    return JSONResponse(ops.retry(ref, body.task if body else None))

# --- tenants, secrets, audit ------------------------------------------------------------

@api_route(router, "tenants")
def tenants(ops: Ops) -> JSONResponse:
    """tenants lists the tenants the caller may see."""
    return JSONResponse(ops.tenants())

@api_route(router, "tenant")
def tenant(name: Name, ops: Ops) -> JSONResponse:
    """tenant shows one tenant the caller may see."""
    return JSONResponse(ops.tenant(name))

@api_route(router, "set_tenant")
def set_tenant(name: Name, body: TenantUpdate, ops: Ops) -> JSONResponse:
    """set_tenant sets a tenant's guaranteed GPUs (admins; weights and limits are Slurm's)."""
    return JSONResponse(
        ops.set_tenant(name, weight=body.weight, guaranteed=body.guaranteed, limits=body.limits, submit=body.submit,
                       priority_classes=body.priority_classes, clusters=body.clusters)
    )

@api_route(router, "secret_names")
def secret_names(tenant: Name, ops: Ops) -> JSONResponse:
    """secret_names lists a tenant's secret names (never values)."""
    return JSONResponse(ops.secret_names(tenant))

@api_route(router, "set_secret")
def set_secret(tenant: Name, name: Name, body: SecretValue, ops: Ops) -> JSONResponse:
    """set_secret sets a secret's value (audited by name)."""
    return JSONResponse(ops.set_secret(tenant, name, body.value))

@api_route(router, "delete_secret")
def delete_secret(tenant: Name, name: Name, ops: Ops) -> JSONResponse:
    """delete_secret deletes a secret (audited by name)."""
    return JSONResponse(ops.delete_secret(tenant, name))

@api_route(router, "allow_secret")
def allow_secret(tenant: Name, name: Name, body: SecretUsers, ops: Ops) -> JSONResponse:
    """allow_secret names the users whose jobs may read a secret, or every member again (``everyone``)."""
    return JSONResponse(ops.allow_secret(tenant, name, body.users, everyone=body.everyone))

@api_route(router, "audit_prune")
def audit_prune(body: AuditPruneRequest, ops: Ops) -> JSONResponse:
    """audit_prune deletes audit lines older than ``before`` (admins, ``confirm`` true; the prune itself is audited)."""
    return JSONResponse(ops.audit_prune(body.before, confirm=body.confirm))

@api_route(router, "audit")
def audit(
    ops: Ops,
    since: Annotated[str | None, Query(max_length=64)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_LIST)] = 200,
) -> JSONResponse:
    """audit is the audit trail, newest first (members: their tenants' lines)."""
    return JSONResponse(ops.audit(since=since or None, limit=limit))

# --- saved capacity-planning reports ----------------------------------------------------

@api_route(router, "plan_reports")
def plan_reports(
    ops: Ops,
    kind: Annotated[str | None, Query(max_length=16)] = None,
    limit: Annotated[int, Query(ge=1, le=MAX_PLAN_LIST)] = 50,
) -> JSONResponse:
    """plan_reports lists the saved capacity-planning reports (admins; a tenant's coordinator sees its own rows)."""
    return JSONResponse(ops.plan_reports(kind=kind or None, limit=limit))

@api_route(router, "plan_report")
def plan_report(
    report_id: Annotated[int, Path(ge=1, le=2**31 - 1)], ops: Ops, plots: bool = False,
) -> JSONResponse:
    """plan_report is one saved report with its figures (and its PNGs, base64, with ``plots``), scoped to the caller."""
    return JSONResponse(ops.plan_report(report_id, plots=plots))

# --- clusters drained from metasched's point of view -----------------------------------

@api_route(router, "cluster_drains")
def cluster_drains(ops: Ops) -> JSONResponse:
    """cluster_drains lists the drained clusters: reason, who drained each and since when (admins)."""
    return JSONResponse(ops.cluster_drains())

@api_route(router, "drain_cluster")
def drain_cluster(cluster: Name, ops: Ops, body: DrainRequest | None = None) -> JSONResponse:
    """drain_cluster gives a cluster no new placements, work running there finishing (admins; idempotent; audited)."""
    return JSONResponse(ops.drain_cluster(cluster, body.reason if body else None))

@api_route(router, "resume_cluster")
def resume_cluster(cluster: Name, ops: Ops) -> JSONResponse:
    """resume_cluster lets a drained cluster take new work again (admins; idempotent; audited)."""
    return JSONResponse(ops.resume_cluster(cluster))

# --- from inside a job ------------------------------------------------------------------

@api_route(router, "commit")
def commit(attempt_id: Name, body: CommitRequest, ops: JobOps) -> JSONResponse:
    """commit records a partition attempt's output manifest: the job's owner with its attempt secret (fenced; once)."""
    return JSONResponse(ops.commit(attempt_id, body.token, body.manifest, secret=body.secret))

@api_route(router, "report_checkpoint")
def report_checkpoint(attempt_id: Name, body: CheckpointReport, ops: JobOps) -> JSONResponse:
    """report_checkpoint records a checkpoint of a running attempt: the job's owner with its attempt secret (fenced)."""
    return JSONResponse(
        ops.report_checkpoint(
            attempt_id, body.token,
            step=body.step, path=body.path, size_bytes=body.size_bytes, duration_s=body.duration_s,
            secret=body.secret,
        )  # fmt: skip
    )

@api_route(router, "attempt_secret")
def attempt_secret(
    attempt_id: Name,
    name: Name,
    ops: JobOps,
    token: Annotated[int, Query(ge=0, le=2**62, description="the attempt's fencing token")],
    secret: Annotated[str | None, Header(alias=SECRET_HEADER, max_length=512)] = None,
) -> JSONResponse:
    """attempt_secret is one secret value the job declared: its owner, with the attempt secret (header), live attempt only."""
    return JSONResponse(ops.attempt_secret(attempt_id, token, name, secret=secret))


def _install_error_handlers(app: FastAPI) -> None:
    """_install_error_handlers answers every error as ``{"error", "message"}`` with its status."""

    async def domain_error(request: Request, exc: Exception) -> JSONResponse:
        if is_authorization_refusal(exc):  # on the record (a store write: off the event loop)
            context: ApiContext = request.app.state.context
            await run_in_threadpool(audit_request_refusal, context.refusals, request.scope, request.state, exc)
        status, body = describe(exc)
        return JSONResponse(body, status_code=status, headers=error_headers(exc))

    async def validation_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, RequestValidationError)
        return JSONResponse(error_body("InvalidRequest", _validation_message(exc)), status_code=400)

    async def http_error(_request: Request, exc: Exception) -> JSONResponse:
        assert isinstance(exc, StarletteHTTPException)
        kind = {404: "NotFound", 405: "MethodNotAllowed"}.get(exc.status_code, "InvalidRequest")
        return JSONResponse(error_body(kind, str(exc.detail)), status_code=exc.status_code)

    async def unexpected(_request: Request, exc: Exception) -> JSONResponse:
        # Starlette re-raises after this answer, so the server logs the traceback once
        body = error_body("InternalError", f"internal error: {type(exc).__name__} (see the service log)")
        return JSONResponse(body, status_code=500)

    app.add_exception_handler(RequestValidationError, validation_error)
    app.add_exception_handler(StarletteHTTPException, http_error)
    for kind in (MetaschedError, SpecError, IllegalTransition, Unauthenticated, SQLAlchemyError):
        app.add_exception_handler(kind, domain_error)
    app.add_exception_handler(Exception, unexpected)


def _validation_message(exc: RequestValidationError) -> str:
    """_validation_message is the first problems of a refused request, as ``where: what``."""
    problems = []
    for error in exc.errors()[:3]:
        where = ".".join(str(part) for part in error.get("loc", ()) if part != "body") or "request"
        problems.append(f"{where}: {error.get('msg', 'invalid')}")
    return clip("invalid request: " + "; ".join(problems), 2_000)


def _version() -> str:
    try:
        return metadata.version("metasched")
    except metadata.PackageNotFoundError:
        return "0"
