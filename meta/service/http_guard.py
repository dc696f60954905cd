"""RequestGuard: the ASGI layer in front of every route: bounded requests, then authentication.

In order: the request target is checked, a request without any credential is refused, the
declared body size is checked (413 before a byte of an oversized body is read), the body is
read up to the bound (a chunked body that grows past it is cut off with 413), and then the
caller is authenticated over exactly those bytes — the credential binds method, target and
body — before any route runs. Only ``PUBLIC`` paths and the web view's pages (``/web``, which check
their own session cookie: meta/service/web) skip authentication. The route then receives the same body bytes and the ``Identity`` in
``request.state.identity``.
"""

from __future__ import annotations

import json
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any

from starlette.concurrency import run_in_threadpool

from meta.service.http_errors import describe, error_body
from tenants.auth import Authenticator, Unauthenticated

Scope = MutableMapping[str, Any]
Message = MutableMapping[str, Any]
Receive = Callable[[], Awaitable[Message]]
Send = Callable[[Message], Awaitable[None]]
ASGIApp = Callable[[Scope, Receive, Send], Awaitable[None]]

DEFAULT_MAX_BODY_BYTES = 4 * 1024 * 1024  # a 1 MiB job file or script can double when JSON-escaped
MAX_TARGET_BYTES = 8 * 1024  # path and query: ids, names and a few filters
PUBLIC = frozenset({"/healthz", "/openapi.json"})
WEB = "/web"  # the web view's pages: a browser has no MUNGE credential, each page checks its session cookie


def is_public(path: str) -> bool:
    """is_public tells whether ``path`` skips MUNGE authentication (health, schema, the web view's pages)."""
    return path in PUBLIC or path == WEB or path.startswith(WEB + "/")


def request_target(scope: Scope) -> str:
    """request_target is the path and query exactly as the client sent them (what its credential binds)."""
    raw = scope.get("raw_path") or scope["path"].encode("utf-8")
    query = scope.get("query_string") or b""
    return (raw + (b"?" + query if query else b"")).decode("latin-1")


class RequestGuard:
    """RequestGuard bounds, reads and authenticates each HTTP request before the app sees it."""

    def __init__(
        self,
        app: ASGIApp,
        authenticator: Authenticator,
        *,
        max_body_bytes: int = DEFAULT_MAX_BODY_BYTES,
        max_target_bytes: int = MAX_TARGET_BYTES,
        on_auth_failure: Callable[[str, Scope], None] | None = None,
    ):
        self.app = app
        # told each refused credential's code and the request (metrics, and the audit by peer)
        self.on_auth_failure = on_auth_failure
        self.authenticator = authenticator
        self.max_body_bytes = max_body_bytes
        self.max_target_bytes = max_target_bytes

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """__call__ is the ASGI entry point."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        target = request_target(scope)
        if len(target) > self.max_target_bytes:
            await _refuse(send, 414, "InvalidRequest", f"request target longer than {self.max_target_bytes} bytes")
            return
        public = is_public(scope["path"])
        header = _header(scope, b"authorization")
        if not public and not (header or "").strip():
            # no credential at all: refused before a byte of the body is read, in the authenticator's words
            await self._authenticate(scope, send, header, target, b"")
            return
        declared = content_length(scope)
        if declared is None:
            await _refuse(send, 400, "InvalidRequest", "bad Content-Length header")
            return
        if declared > self.max_body_bytes:
            await _refuse(send, 413, "PayloadTooLarge", f"request body larger than {self.max_body_bytes} bytes")
            return
        body = await _read_body(receive, self.max_body_bytes)
        if body is None:
            await _refuse(send, 413, "PayloadTooLarge", f"request body larger than {self.max_body_bytes} bytes")
            return
        if not public:
            identity = await self._authenticate(scope, send, header, target, body)
            if identity is None:
                return
            scope.setdefault("state", {})["identity"] = identity
        await self.app(scope, _replay(body, receive), send)

    async def _authenticate(self, scope: Scope, send: Send, header: str | None, target: str, body: bytes) -> Any:
        """_authenticate is the caller's Identity, or None once a refusal (401, or 503) has been sent."""
        try:
            # the authenticator may block (munged, unmunge): keep the event loop free
            return await run_in_threadpool(self.authenticator.authenticate, header, scope["method"], target, body)
        except Unauthenticated as exc:
            if self.on_auth_failure is not None:  # it may write an audit row: off the event loop
                await run_in_threadpool(self.on_auth_failure, getattr(exc, "code", "invalid"), scope)
            status, answer = describe(exc)  # 401, or 503 when the service's own munged is down
            await _refuse(send, status, answer["error"], answer["message"])
            return None


def _header(scope: Scope, name: bytes) -> str | None:
    """_header is the first value of one request header (latin-1, as HTTP headers are)."""
    for key, value in scope.get("headers") or []:
        if key.lower() == name:
            return value.decode("latin-1")
    return None


def content_length(scope: Scope) -> int | None:
    """content_length is the declared body size (0 when absent), None when the header is not a number."""
    value = _header(scope, b"content-length")
    if value is None:
        return 0
    value = value.strip()
    return int(value) if value.isascii() and value.isdigit() else None


async def _read_body(receive: Receive, limit: int) -> bytes | None:
    """_read_body reads the whole body, or stops and returns None as soon as it exceeds ``limit``."""
    chunks: list[bytes] = []
    size = 0
    while True:
        message = await receive()
        if message["type"] != "http.request":
            break  # the client went away: what arrived is all there is
        chunk = message.get("body", b"")
        size += len(chunk)
        if size > limit:
            return None
        chunks.append(chunk)
        if not message.get("more_body", False):
            break
    return b"".join(chunks)


def _replay(body: bytes, receive: Receive) -> Receive:
    """_replay hands the already-read body to the app once, then passes later messages (disconnect) through."""
    delivered = False

    async def replay() -> Message:
        nonlocal delivered
        if not delivered:
            delivered = True
            return {"type": "http.request", "body": body, "more_body": False}
        return await receive()

    return replay


async def _refuse(send: Send, status: int, kind: str, message: str) -> None:
    """_refuse answers with the API's error JSON and closes the exchange."""
    payload = json.dumps(error_body(kind, message)).encode("utf-8")
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    if status in (413, 414):
        headers.append((b"connection", b"close"))  # the unread rest of the request must not be parsed as a next one
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
