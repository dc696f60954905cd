"""The operation table is the one list of API operations: the service's routes come from it and the client's requests too."""

from __future__ import annotations

from typing import Any

from fastapi import APIRouter

from cli.remote import ApiBackend
from meta.model.api_operations import OPERATIONS
from meta.service.http import router
from meta.service.op_routes import unmatched
from meta.service.web.routes import router as web_router


class _Recorder:
    """_Recorder stands for ApiClient: it keeps each request instead of sending it."""

    def __init__(self) -> None:
        self.sent: list[dict[str, Any]] = []

    def call(self, method: str, path: str, **kwargs: Any) -> Any:
        self.sent.append({"method": method, "path": path, **kwargs})
        return {}


def test_every_operation_has_its_route_and_every_v1_route_is_an_operation() -> None:
    assert unmatched([*router.routes, *web_router.routes]) == []


def test_a_route_outside_the_table_or_a_missing_one_is_named() -> None:
    extra = APIRouter()
    extra.add_api_route("/v1/jobs/{ref}/poke", lambda ref: None, methods=["POST"])
    kept = [route for route in router.routes if getattr(route, "name", "") != "cancel"]
    found = unmatched([*kept, *web_router.routes, *extra.routes])
    assert found == ["cancel: no route POST /v1/jobs/{ref}/cancel",
                     "route POST /v1/jobs/{ref}/poke is not in the operation table"]


def test_the_client_builds_each_request_from_the_table() -> None:
    client = _Recorder()
    backend = ApiBackend(client, "tenant-a")  # type: ignore[arg-type]
    backend.cancel("j1/x")
    backend.call("submit", spec_text="t", source="f.yaml")
    backend.attempt_secret("a1", 3, "TOKEN", secret="s")
    backend.queue(users=["alice"], states=["PD"])
    cancel, submit, secret, queue = client.sent
    assert (cancel["method"], cancel["path"], cancel["query"]) == ("POST", "/v1/jobs/j1%2Fx/cancel", {"as_tenant": "tenant-a"})
    assert submit["body"] == {"spec_text": "t", "source": "f.yaml", "tenant": "tenant-a"} and "as_tenant" not in submit["query"]
    assert secret["path"] == "/v1/attempts/a1/secrets/TOKEN" and secret["query"]["token"] == 3
    assert secret["headers"] == {"X-Metasched-Attempt-Secret": "s"}
    assert queue["query"]["user"] == ["alice"] and queue["query"]["state"] == ["PD"]
    assert [op.name for op in OPERATIONS if op.resend] == ["commit"]
