"""Backend: what the CLI's commands call, through the API (``cli.remote``) or on the store (``cli.local``).

Both answer the same JSON-ready values, so each command renders one way whichever path it took.
``meta.service.operations.Operations`` is the local implementation (it matches this protocol
structurally); ``cli.remote.ApiBackend`` sends each call to the API route of the same name.
"""

from __future__ import annotations

from typing import Any, Protocol


class Backend(Protocol):
    """Backend is every operation the CLI offers, for the caller the backend was built for."""

    def whoami(self) -> dict[str, Any]:
        """whoami describes the caller."""
        ...

    def submit_text(
        self, spec_text: str, *, source: str = "<job>", key: str | None = None, submit_dir: str | None = None
    ) -> dict[str, Any]:
        """submit_text submits a job file's text."""
        ...

    def submit_texts(
        self, files: list[tuple[str, str]], *, key: str | None = None, submit_dir: str | None = None
    ) -> list[dict[str, Any]]:
        """submit_texts submits several job files (source, text) at once: all or none."""
        ...

    def submit_spec(self, spec: Any, *, key: str | None = None, submit_dir: str | None = None) -> dict[str, Any]:
        """submit_spec submits a parsed spec (msbatch)."""
        ...

    def list_jobs(
        self, *, tenant: str | None = None, state: str | None = None, limit: int = 200, after: str | None = None
    ) -> list[dict[str, Any]]:
        """list_jobs lists jobs, newest first."""
        ...

    def queue(self, **filters: Any) -> list[dict[str, Any]]:
        """queue lists waiting and launched jobs with squeue's fields (msqueue)."""
        ...

    def status(self, ref: str) -> dict[str, Any]:
        """status is one job in full."""
        ...

    def explain(self, ref: str) -> dict[str, Any]:
        """explain is why a job's tasks wait."""
        ...

    def explain_history(self, ref: str, limit: int = 20) -> dict[str, Any]:
        """explain_history is what ran before a job while it waited."""
        ...

    def outputs(self, ref: str) -> dict[str, Any]:
        """outputs is a job's committed outputs."""
        ...

    def checkpoints(self, ref: str, *, node_mtbf_s: float = ...) -> dict[str, Any]:
        """checkpoints lists a job's checkpoints and the recommended interval."""
        ...

    def cancel(self, ref: str) -> dict[str, Any]:
        """cancel stops a job."""
        ...

    def hold(self, ref: str) -> dict[str, Any]:
        """hold keeps a waiting job from being scheduled."""
        ...

    def release(self, ref: str) -> dict[str, Any]:
        """release lets a held job be scheduled."""
        ...

    def retry(self, ref: str, task: int | None = None) -> list[dict[str, Any]]:
        """retry re-queues failed or cancelled tasks."""
        ...

    def tenants(self) -> list[dict[str, Any]]:
        """tenants lists tenants."""
        ...

    def tenant(self, name: str) -> dict[str, Any]:
        """tenant shows one tenant."""
        ...

    def set_tenant(
        self, name: str, *, weight: float | None = None, guaranteed: list[str] | None = None,
        limits: list[str] | None = None, submit: dict[str, float | None] | None = None,
    ) -> dict[str, Any]:
        """set_tenant changes a tenant (``submit``: its submit limits, None values unset)."""
        ...

    def secret_names(self, tenant: str) -> list[str]:
        """secret_names lists a tenant's secret names."""
        ...

    def set_secret(self, tenant: str, name: str, value: str) -> dict[str, Any]:
        """set_secret sets a secret."""
        ...

    def delete_secret(self, tenant: str, name: str) -> dict[str, Any]:
        """delete_secret deletes a secret."""
        ...

    def audit(self, *, since: str | None = None, limit: int = 200) -> list[dict[str, Any]]:
        """audit reads the audit trail."""
        ...

    def commit(self, attempt_id: str, token: int, manifest: Any, *, secret: str | None = None) -> dict[str, Any]:
        """commit records a partition's output manifest."""
        ...

    def report_checkpoint(
        self, attempt_id: str, token: int, *, step: int, path: str, size_bytes: int | None = None,
        duration_s: float | None = None, secret: str | None = None,
    ) -> dict[str, Any]:
        """report_checkpoint records a checkpoint."""
        ...

    def attempt_secret(self, attempt_id: str, token: int, name: str, *, secret: str | None = None) -> dict[str, Any]:
        """attempt_secret is one secret value the running job declared."""
        ...
