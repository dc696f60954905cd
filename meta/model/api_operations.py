"""The API's operations, each declared once: name, HTTP method, path template and where each argument goes.

The service registers its routes from this table (``meta.service.op_routes``) and the CLI's
client builds every request from it (``cli.remote.ApiBackend.call``), so "cancel a job" is
spelled here and in the ``Operations`` method that does it, nowhere else. Standard library
only: the thin client imports it.
"""

from __future__ import annotations

from dataclasses import dataclass
from typing import Literal

Where = Literal["path", "query", "body", "header"]
# job ids one GET /v1/queue may name: the route refuses more, the client pages by it
MAX_QUEUE_JOB_IDS = 64
TenantAt = Literal["query", "body", "none"]


@dataclass(frozen=True)
class Arg:
    """Arg is one argument of an operation: its Python name, where it travels, and its name there."""

    name: str
    at: Where
    wire: str = ""  # the query key, body field or header name when it differs from ``name``
    # a path argument that names something: an empty one, or one with '/', is refused by the client in
    # these words (the server would route it elsewhere, never to the name's own check)
    what: str = ""

    @property
    def key(self) -> str:
        """key is the argument's name on the wire."""
        return self.wire or self.name


@dataclass(frozen=True)
class Operation:
    """Operation is one API operation: one route of the service and one call of the client."""

    name: str
    method: str
    path: str  # a template: ``{arg}`` names a path argument (one percent-encoded segment)
    args: tuple[Arg, ...] = ()  # in the order positional arguments bind to
    tag: str = "jobs"
    status_code: int = 200  # the route's documented success status
    # where the CLI's acting tenant (--tenant) goes: ``?as_tenant=``, the body's ``tenant`` field, or nowhere
    tenant: TenantAt = "query"
    # an unanswered request may be sent again: only operations the service makes idempotent
    resend: bool = False

    def of(self, at: Where) -> tuple[Arg, ...]:
        """of is the operation's arguments that travel ``at`` (path, query, body or header)."""
        return tuple(arg for arg in self.args if arg.at == at)


def _path(*names: str) -> tuple[Arg, ...]:
    return tuple(Arg(name, "path") for name in names)


def _query(*names: str) -> tuple[Arg, ...]:
    return tuple(Arg(name, "query") for name in names)


def _body(*names: str) -> tuple[Arg, ...]:
    return tuple(Arg(name, "body") for name in names)


_SUBMIT_COMMON = _body("key", "submit_dir")
_TENANT = Arg("name", "path", what="tenant name")
_SECRET = (Arg("tenant", "path", what="tenant name"), Arg("name", "path", what="secret name"))
_CLUSTER = Arg("cluster", "path", what="cluster name")

OPERATIONS: tuple[Operation, ...] = (
    Operation("whoami", "GET", "/v1/whoami", tag="service"),
    # --- jobs
    Operation("submit", "POST", "/v1/jobs", (*_body("spec_text", "spec", "source"), *_SUBMIT_COMMON),
              status_code=201, tenant="body"),
    Operation("submit_batch", "POST", "/v1/jobs/batch", (*_body("jobs"), *_SUBMIT_COMMON),
              status_code=201, tenant="body"),
    Operation("list_jobs", "GET", "/v1/jobs", _query("tenant", "state", "limit", "after")),
    Operation("queue", "GET", "/v1/queue", (
        Arg("users", "query", "user"), Arg("accounts", "query", "account"), Arg("partitions", "query", "partition"),
        Arg("states", "query", "state"), Arg("jobs", "query", "job"), Arg("names", "query", "name"),
        *_query("limit", "any_age"),
    )),
    Operation("status", "GET", "/v1/jobs/{ref}", _path("ref")),
    Operation("explain", "GET", "/v1/jobs/{ref}/explain", _path("ref")),
    Operation("explain_history", "GET", "/v1/jobs/{ref}/explain/history", (*_path("ref"), *_query("limit"))),
    Operation("outputs", "GET", "/v1/jobs/{ref}/outputs", _path("ref")),
    Operation("checkpoints", "GET", "/v1/jobs/{ref}/checkpoints", (*_path("ref"), *_query("node_mtbf_s"))),
    Operation("cancel", "POST", "/v1/jobs/{ref}/cancel", _path("ref")),
    Operation("hold", "POST", "/v1/jobs/{ref}/hold", _path("ref")),
    Operation("release", "POST", "/v1/jobs/{ref}/release", _path("ref")),
    Operation("retry", "POST", "/v1/jobs/{ref}/retry", (*_path("ref"), *_body("task"))),
    # --- tenants, secrets, audit
    Operation("tenants", "GET", "/v1/tenants", tag="tenants"),
    Operation("tenant", "GET", "/v1/tenants/{name}", (_TENANT,), tag="tenants"),
    Operation("set_tenant", "PUT", "/v1/tenants/{name}",
              (_TENANT, *_body("weight", "guaranteed", "limits", "submit", "priority_classes", "clusters")), tag="tenants"),
    Operation("secret_names", "GET", "/v1/tenants/{tenant}/secrets", _SECRET[:1], tag="secrets"),
    Operation("set_secret", "PUT", "/v1/tenants/{tenant}/secrets/{name}", (*_SECRET, *_body("value")), tag="secrets"),
    Operation("delete_secret", "DELETE", "/v1/tenants/{tenant}/secrets/{name}", _SECRET, tag="secrets"),
    Operation("allow_secret", "PUT", "/v1/tenants/{tenant}/secrets/{name}/users", (*_SECRET, *_body("users", "everyone")),
              tag="secrets"),
    Operation("audit", "GET", "/v1/audit", _query("since", "limit"), tag="audit"),
    Operation("audit_prune", "POST", "/v1/audit/prune", _body("before", "confirm"), tag="audit", tenant="none"),
    Operation("web_link", "POST", "/v1/web/link", tag="web", tenant="none"),
    # --- saved capacity-planning reports (admins all; a tenant's coordinator its own rows)
    Operation("plan_reports", "GET", "/v1/plan/reports", _query("kind", "limit"), tag="plan"),
    Operation("plan_report", "GET", "/v1/plan/reports/{report_id}",
              (Arg("report_id", "path", what="report id"), *_query("plots")), tag="plan"),
    # --- clusters drained from metasched's point of view (admins only; no tenant is involved)
    Operation("cluster_drains", "GET", "/v1/clusters/drains", tag="clusters", tenant="none"),
    Operation("drain_cluster", "POST", "/v1/clusters/{cluster}/drain", (_CLUSTER, *_body("reason")), tag="clusters",
              tenant="none"),
    Operation("resume_cluster", "POST", "/v1/clusters/{cluster}/resume", (_CLUSTER,), tag="clusters", tenant="none"),
    # --- from inside a job (the attempt decides the tenant; ``as_tenant`` changes nothing there)
    # the service's commit is idempotent per attempt (checkpoint.manifest.commit): a commit whose
    # answer was lost to a restarting daemon is sent again rather than failing the job
    Operation("commit", "POST", "/v1/attempts/{attempt_id}/commit",
              (*_path("attempt_id"), *_body("token", "manifest", "secret")), tag="job side", resend=True),
    Operation("report_checkpoint", "POST", "/v1/attempts/{attempt_id}/checkpoints",
              (*_path("attempt_id"), *_body("token", "step", "path", "size_bytes", "duration_s", "secret")),
              tag="job side"),
    # the attempt secret travels in a header, never in the URL (access logs)
    Operation("attempt_secret", "GET", "/v1/attempts/{attempt_id}/secrets/{name}",
              (*_path("attempt_id"), Arg("token", "query"), *_path("name"),
               Arg("secret", "header", "X-Metasched-Attempt-Secret")), tag="job side"),
)  # fmt: skip

BY_NAME: dict[str, Operation] = {op.name: op for op in OPERATIONS}
"""BY_NAME finds an operation by its name."""
