"""In-process ASGI: local mode sends each API request to the service's app in this process (standard library asyncio only)."""

from __future__ import annotations

import asyncio
import os
import traceback
from collections.abc import Awaitable, Callable, MutableMapping
from typing import Any
from urllib.parse import unquote

Message = MutableMapping[str, Any]
App = Callable[[Message, Callable[[], Awaitable[Message]], Callable[[Message], Awaitable[None]]], Awaitable[None]]


class InProcessTransport:
    """InProcessTransport is an ``ApiClient`` transport that runs one ASGI app per request, in this process."""

    def __init__(self, app: App):
        self.app = app

    def __call__(self, method: str, target: str, body: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        """__call__ sends one request to the app and returns its status and body."""
        return asyncio.run(_exchange(self.app, method, target, body or b"", headers))


async def _exchange(app: App, method: str, target: str, body: bytes, headers: dict[str, str]) -> tuple[int, bytes]:
    """_exchange builds the HTTP scope a server would, runs the app and collects its answer."""
    path, _, query = target.partition("?")
    sent = [(name.lower().encode("latin-1"), value.encode("latin-1")) for name, value in headers.items()]
    sent.append((b"content-length", str(len(body)).encode("ascii")))
    scope: Message = {
        "type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
        "path": unquote(path), "raw_path": path.encode("latin-1"), "query_string": query.encode("latin-1"),
        "root_path": "", "headers": sent, "client": ("local", 0), "server": ("localhost", 0),
    }  # fmt: skip
    requested = False
    status = 500
    chunks: list[bytes] = []
    answered = asyncio.Event()

    async def receive() -> Message:
        nonlocal requested
        if not requested:
            requested = True
            return {"type": "http.request", "body": body, "more_body": False}
        await answered.wait()  # as a client still connected: it leaves once the answer is whole
        return {"type": "http.disconnect"}

    async def send(message: Message) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = int(message["status"])
        elif message["type"] == "http.response.body":
            chunks.append(bytes(message.get("body", b"")))
            if not message.get("more_body", False):
                answered.set()

    try:
        await app(scope, receive, send)
    except Exception:  # noqa: BLE001 - Starlette re-raises after its 500 answer (a server would log it)
        if not chunks:
            raise
        if os.environ.get("METASCHED_DEBUG"):
            traceback.print_exc()
    return status, b"".join(chunks)
