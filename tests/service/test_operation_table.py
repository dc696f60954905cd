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


def test_each_route_takes_the_arguments_the_table_sends() -> None:
    from fastapi import FastAPI

    app = FastAPI()
    app.include_router(router)
    app.include_router(web_router)
    schema = app.openapi()  # what each route takes, as the service documents it
    for op in OPERATIONS:
        route = schema["paths"][op.path][op.method.lower()]
        params = {(p["in"], p["name"].lower()) for p in route.get("parameters", [])}
        sent = {(a.at, a.key.lower()) for a in op.args if a.at != "body"}
        sent |= {("query", "as_tenant")} if op.tenant == "query" else set()
        assert sent <= params, (op.name, sent - params)
        assert {name for at, name in params if at == "path"} == {a.key for a in op.of("path")}, op.name
        wanted = {a.key for a in op.of("body")} | ({"tenant"} if op.tenant == "body" else set())
        assert wanted <= _body_fields(schema, route), (op.name, wanted - _body_fields(schema, route))


def _body_fields(schema: dict[str, Any], route: dict[str, Any]) -> set[str]:
    """_body_fields is the JSON body's field names a route documents (none without a body)."""
    body = route.get("requestBody", {}).get("content", {}).get("application/json", {}).get("schema", {})
    refs = [body.get("$ref")] + [alt.get("$ref") for alt in body.get("anyOf", [])]
    fields: set[str] = set()
    for ref in filter(None, refs):
        fields |= set(schema["components"]["schemas"][ref.rsplit("/", 1)[-1]].get("properties", {}))
    return fields
