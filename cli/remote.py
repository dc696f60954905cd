"""ApiBackend: every CLI operation as one call to the API (docs/identity.md §2)."""

from __future__ import annotations

from typing import Any

from cli.client import ApiClient, segment

_NODE_MTBF_S = 30 * 24 * 3600.0


class ApiBackend:
    """ApiBackend implements ``cli.backend.Backend`` over an ApiClient, acting for ``tenant`` when given."""

    def __init__(self, client: ApiClient, tenant: str | None = None):
        self.client = client
        self.as_tenant = tenant  # not ``tenant``: that is a method of the Backend

    def _get(self, path: str, **query: Any) -> Any:
        return self.client.call("GET", path, query={**query, "as_tenant": self.as_tenant})

    def _send(self, method: str, path: str, body: Any = None, *, retry_unanswered: bool = False) -> Any:
        return self.client.call(method, path, query={"as_tenant": self.as_tenant}, body=body,
                                retry_unanswered=retry_unanswered)

    def whoami(self) -> dict[str, Any]:
        """whoami is GET /v1/whoami."""
        return self._get("/v1/whoami")

    def submit_text(
        self, spec_text: str, *, source: str = "<job>", key: str | None = None, submit_dir: str | None = None
    ) -> dict[str, Any]:
        """submit_text is POST /v1/jobs with the job file's text."""
        body = {"spec_text": spec_text, "source": source, "key": key, "tenant": self.as_tenant, "submit_dir": submit_dir}
        return self.client.call("POST", "/v1/jobs", body=body)

    def submit_texts(
        self, files: list[tuple[str, str]], *, key: str | None = None, submit_dir: str | None = None
    ) -> list[dict[str, Any]]:
        """submit_texts is POST /v1/jobs/batch with several job files."""
        jobs = [{"spec_text": text, "source": source} for source, text in files]
        body = {"jobs": jobs, "key": key, "tenant": self.as_tenant, "submit_dir": submit_dir}
        return self.client.call("POST", "/v1/jobs/batch", body=body)["jobs"]

    def submit_spec(self, spec: Any, *, key: str | None = None, submit_dir: str | None = None) -> dict[str, Any]:
        """submit_spec is POST /v1/jobs with a parsed spec (the server validates it)."""
        body = {"spec": spec, "key": key, "tenant": self.as_tenant, "submit_dir": submit_dir}
        return self.client.call("POST", "/v1/jobs", body=body)

    def list_jobs(
        self, *, tenant: str | None = None, state: str | None = None, limit: int = 200, after: str | None = None
    ) -> list[dict[str, Any]]:
        """list_jobs is GET /v1/jobs."""
        return self._get("/v1/jobs", tenant=tenant, state=state, limit=limit, after=after)

    def queue(self, **filters: Any) -> list[dict[str, Any]]:
        """queue is GET /v1/queue (filters: users, accounts, partitions, states, jobs, names as lists)."""
        names = {"users": "user", "accounts": "account", "partitions": "partition", "states": "state",
                 "jobs": "job", "names": "name"}  # fmt: skip
        return self._get("/v1/queue", **{names.get(key, key): value for key, value in filters.items()})

    def status(self, ref: str) -> dict[str, Any]:
        """status is GET /v1/jobs/{ref}."""
        return self._get(f"/v1/jobs/{segment(ref)}")

    def explain(self, ref: str) -> dict[str, Any]:
        """explain is GET /v1/jobs/{ref}/explain."""
        return self._get(f"/v1/jobs/{segment(ref)}/explain")

    def explain_history(self, ref: str, limit: int = 20) -> dict[str, Any]:
        """explain_history is GET /v1/jobs/{ref}/explain/history."""
        return self._get(f"/v1/jobs/{segment(ref)}/explain/history?limit={int(limit)}")

    def outputs(self, ref: str) -> dict[str, Any]:
        """outputs is GET /v1/jobs/{ref}/outputs."""
        return self._get(f"/v1/jobs/{segment(ref)}/outputs")

    def checkpoints(self, ref: str, *, node_mtbf_s: float = _NODE_MTBF_S) -> dict[str, Any]:
        """checkpoints is GET /v1/jobs/{ref}/checkpoints."""
        return self._get(f"/v1/jobs/{segment(ref)}/checkpoints", node_mtbf_s=repr(float(node_mtbf_s)))

    def cancel(self, ref: str) -> dict[str, Any]:
        """cancel is POST /v1/jobs/{ref}/cancel."""
        return self._send("POST", f"/v1/jobs/{segment(ref)}/cancel")

    def hold(self, ref: str) -> dict[str, Any]:
        """hold is POST /v1/jobs/{ref}/hold."""
        return self._send("POST", f"/v1/jobs/{segment(ref)}/hold")

    def release(self, ref: str) -> dict[str, Any]:
        """release is POST /v1/jobs/{ref}/release."""
        return self._send("POST", f"/v1/jobs/{segment(ref)}/release")

    def retry(self, ref: str, task: int | None = None) -> list[dict[str, Any]]:
        """retry is POST /v1/jobs/{ref}/retry."""
        return self._send("POST", f"/v1/jobs/{segment(ref)}/retry", {"task": task})

    def tenants(self) -> list[dict[str, Any]]:
        """tenants is GET /v1/tenants."""
        return self._get("/v1/tenants")

    def tenant(self, name: str) -> dict[str, Any]:
        """tenant is GET /v1/tenants/{name}."""
        return self._get(f"/v1/tenants/{segment(name)}")

    def set_tenant(
        self, name: str, *, weight: float | None = None, guaranteed: list[str] | None = None,
        limits: list[str] | None = None, submit: dict[str, float | None] | None = None,
    ) -> dict[str, Any]:
        """set_tenant is PUT /v1/tenants/{name}."""
        body = {"weight": weight, "guaranteed": guaranteed, "limits": limits, **({"submit": submit} if submit else {})}
        return self._send("PUT", f"/v1/tenants/{segment(name)}", body)

    def secret_names(self, tenant: str) -> list[str]:
        """secret_names is GET /v1/tenants/{tenant}/secrets."""
        return self._get(f"/v1/tenants/{segment(tenant)}/secrets")

    def set_secret(self, tenant: str, name: str, value: str) -> dict[str, Any]:
        """set_secret is PUT /v1/tenants/{tenant}/secrets/{name}."""
        return self._send("PUT", f"/v1/tenants/{segment(tenant)}/secrets/{segment(name)}", {"value": value})

    def delete_secret(self, tenant: str, name: str) -> dict[str, Any]:
        """delete_secret is DELETE /v1/tenants/{tenant}/secrets/{name}."""
        return self._send("DELETE", f"/v1/tenants/{segment(tenant)}/secrets/{segment(name)}")

    def audit(self, *, since: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """audit is GET /v1/audit."""
        return self._get("/v1/audit", since=since, limit=limit)

    def web_link(self) -> dict[str, Any]:
        """web_link is POST /v1/web/link: a single-use login link to the web view (``metasched web``)."""
        return self.client.call("POST", "/v1/web/link")

    def commit(self, attempt_id: str, token: int, manifest: Any, *, secret: str | None = None) -> dict[str, Any]:
        """commit is POST /v1/attempts/{id}/commit."""
        body = {"token": token, "manifest": manifest, "secret": secret}
        # the service's commit is idempotent per attempt (checkpoint.manifest.commit): a commit
        # whose answer was lost to a restarting daemon is sent again rather than failing the job
        return self._send("POST", f"/v1/attempts/{segment(attempt_id)}/commit", body, retry_unanswered=True)

    def report_checkpoint(
        self, attempt_id: str, token: int, *, step: int, path: str, size_bytes: int | None = None,
        duration_s: float | None = None, secret: str | None = None,
    ) -> dict[str, Any]:
        """report_checkpoint is POST /v1/attempts/{id}/checkpoints."""
        body = {"token": token, "step": step, "path": path, "size_bytes": size_bytes, "duration_s": duration_s,
                "secret": secret}  # fmt: skip
        return self._send("POST", f"/v1/attempts/{segment(attempt_id)}/checkpoints", body)

    def attempt_secret(self, attempt_id: str, token: int, name: str, *, secret: str | None = None) -> dict[str, Any]:
        """attempt_secret is GET /v1/attempts/{id}/secrets/{name} (the attempt secret in a header, never the URL)."""
        return self.client.call(
            "GET", f"/v1/attempts/{segment(attempt_id)}/secrets/{segment(name)}", query={"token": token},
            headers={"X-Metasched-Attempt-Secret": secret} if secret else None,
        )  # fmt: skip
