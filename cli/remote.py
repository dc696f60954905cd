"""ApiBackend: every CLI operation as one request to the API, built from the operation table (docs/identity.md §2).

``backend.call("cancel", ref)`` or ``backend.cancel(ref)`` alike: the method, path, query, body
and headers all come from ``meta.model.api_operations``; nothing here lists the operations.
"""

from __future__ import annotations

import functools
from collections.abc import Callable
from typing import Any

from cli.client import ApiClient, segment
from meta.model.api_operations import BY_NAME, Operation
from meta.model.errors import InvalidRequest


class ApiBackend:
    """ApiBackend sends the table's operations over an ApiClient, acting for ``tenant`` when given."""

    def __init__(self, client: ApiClient, tenant: str | None = None):
        self.client = client
        self.as_tenant = tenant  # not ``tenant``: that is an operation's name

    def call(self, name: str, *args: Any, **kwargs: Any) -> Any:
        """call sends operation ``name`` with its arguments (positional in the table's order) and returns the answer."""
        op = BY_NAME[name]
        values = _bind(op, args, kwargs)
        path = op.path.format(**{arg.name: segment(str(values[arg.name])) for arg in op.of("path")})
        query = {arg.key: values.get(arg.name) for arg in op.of("query")}
        body: dict[str, Any] | None = None
        if op.of("body") or op.tenant == "body":
            # a missing or None field is the route's default: leave it out
            body = {arg.key: values[arg.name] for arg in op.of("body") if values.get(arg.name) is not None}
            if op.tenant == "body" and self.as_tenant is not None:
                body["tenant"] = self.as_tenant
        if op.tenant == "query":
            query["as_tenant"] = self.as_tenant  # last, as the service's clients always sent it
        headers = {arg.key: str(values[arg.name]) for arg in op.of("header") if values.get(arg.name)}
        return self.client.call(op.method, path, query=query, body=body, headers=headers or None,
                                retry_unanswered=op.resend)  # fmt: skip

    def __getattr__(self, name: str) -> Callable[..., Any]:
        """An operation's name is a method: ``backend.status(ref)`` is ``backend.call("status", ref)``."""
        if name not in BY_NAME:
            raise AttributeError(f"{type(self).__name__} has no operation {name!r}")
        return functools.partial(self.call, name)


def _bind(op: Operation, args: tuple[Any, ...], kwargs: dict[str, Any]) -> dict[str, Any]:
    """_bind maps positional and keyword arguments onto the operation's argument names (unknown ones are refused)."""
    names = [arg.name for arg in op.args]
    if len(args) > len(names):
        raise TypeError(f"{op.name}() takes {len(names)} arguments, {len(args)} given")
    values = dict(zip(names, args, strict=False))
    for key, value in kwargs.items():
        if key not in names or key in values:
            raise TypeError(f"{op.name}() got an unexpected or repeated argument {key!r}")
        values[key] = value
    missing = [arg.name for arg in op.of("path") if values.get(arg.name) is None]
    if missing:
        raise TypeError(f"{op.name}() needs {', '.join(missing)}")
    for arg in op.of("path"):
        value = str(values[arg.name])
        if arg.what and (not value or "/" in value):
            raise InvalidRequest(f"invalid {arg.what} {value!r}: it must be one non-empty name, without '/'")
    return values
