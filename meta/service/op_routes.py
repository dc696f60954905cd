"""Routes registered from the operation table: the path, method, tag and status of each API route come from ``meta.model.api_operations``."""

from __future__ import annotations

from collections.abc import Callable, Iterable
from typing import Any, TypeVar

from fastapi import APIRouter
from fastapi.routing import APIRoute

from meta.model.api_operations import BY_NAME, OPERATIONS

F = TypeVar("F", bound=Callable[..., Any])


def api_route(router: APIRouter, name: str) -> Callable[[F], F]:
    """api_route registers the decorated handler on ``router`` as operation ``name`` of the table."""
    op = BY_NAME[name]

    def register(handler: F) -> F:
        if handler.__name__ != name:  # the route's name (OpenAPI, metrics) is the operation's
            raise ValueError(f"handler {handler.__name__!r} registered as operation {name!r}")
        extra = {"status_code": op.status_code} if op.status_code != 200 else {}
        router.add_api_route(op.path, handler, methods=[op.method], tags=[op.tag], **extra)
        return handler

    return register


def unmatched(routes: Iterable[Any]) -> list[str]:
    """unmatched lists the table's operations with no route, and the ``/v1`` routes that are not in the table."""
    served = {(method, route.path) for route in routes if isinstance(route, APIRoute) for method in route.methods}
    declared = {(op.method, op.path) for op in OPERATIONS}
    missing = [f"{op.name}: no route {op.method} {op.path}" for op in OPERATIONS if (op.method, op.path) not in served]
    extra = [f"route {method} {path} is not in the operation table" for method, path in sorted(served - declared)
             if path.startswith("/v1/")]  # fmt: skip
    return missing + extra
