"""RequestGate: a bound on the requests in flight, with a reserve that only job-side calls and health checks may use.

uvicorn's own ``limit_concurrency`` counted *connections*, idle ones included, and answered 503
to everyone once 256 were open: any local user could hold them and take the API down (issue 22,
S1). Connections are now bounded per peer (meta/service/connection_guard.py); this gate bounds
what they cost once a request head has arrived. Ordinary requests may use ``limit - reserve``
slots; a running job's commit, checkpoint report and secret fetch, and ``/healthz``, may use all
``limit``: a crowd of ordinary callers cannot make a job fail its commit or its start. And one
peer (a Unix user, an IP address: meta/service/connection_guard.py puts it in the scope) may have
at most ``per_peer`` requests in flight, so one user's slow requests — even to job-side paths,
even without a valid credential, each held up to the body deadline — cannot fill the reserve:
that takes ``limit / per_peer`` users acting together. Once admitted, a request waits for its
peer's tokens (meta/service/peer_pace.py): a flood of requests is slowed, not served at the
cycle's expense.

A refusal is ``503 Busy`` with ``Retry-After``: the service looked at nothing but the path, so the
client may send the request again (cli/client.py does, with back-off).
"""

from __future__ import annotations

import asyncio
import json
import re
from collections import Counter
from dataclasses import dataclass, field

from meta.model.api_operations import OPERATIONS
from meta.service.http_errors import error_body
from meta.service.http_guard import ASGIApp, Receive, Scope, Send
from meta.service.peer_pace import PeerPace, request_cost

DEFAULT_LIMIT = 256  # requests in flight at once (each holds a task, perhaps a worker thread)
DEFAULT_RESERVE = 32  # of those, kept for job-side calls and health checks
DEFAULT_PER_PEER = 32  # one peer's share of the requests in flight (it may retry for the rest)
PEER = "metasched.peer"  # the scope key naming the connection's peer (``uid:N``, ``ip:ADDR``)
BUSY = "Busy"  # the error type of every "try again" refusal (cli/client.py retries exactly these)
RETRY_AFTER_S = 1
HEALTH = "/healthz"


def _job_side_pattern() -> re.Pattern[str]:
    """_job_side_pattern matches the job-side routes' paths, taken from the operation table (no second list)."""
    paths = [op.path for op in OPERATIONS if op.tag == "job side"]
    alternatives = [re.sub(r"\\\{[a-z_]+\\\}", "[^/]+", re.escape(path)) for path in paths]
    return re.compile("(?:" + "|".join(alternatives) + ")")


JOB_SIDE = _job_side_pattern()


def is_reserved(path: str) -> bool:
    """is_reserved tells whether ``path`` may use the reserve: a job-side route or the health check."""
    return path == HEALTH or JOB_SIDE.fullmatch(path) is not None


async def answer_busy(send: Send, why: str) -> None:
    """answer_busy sends ``503 Busy`` (Retry-After, Connection: close): the request was not looked at."""
    payload = json.dumps(error_body(BUSY, f"{why}; try again")).encode("utf-8")
    headers = [
        (b"content-type", b"application/json"),
        (b"content-length", str(len(payload)).encode()),
        (b"retry-after", str(RETRY_AFTER_S).encode()),
        (b"connection", b"close"),  # frees the connection (and its share of the peer's limit) at once
    ]
    await send({"type": "http.response.start", "status": 503, "headers": headers})
    await send({"type": "http.response.body", "body": payload})


@dataclass
class RequestGate:
    """RequestGate admits a request while fewer than its bound are in flight (the reserve kept for job-side paths)."""

    app: ASGIApp
    limit: int = DEFAULT_LIMIT
    reserve: int = DEFAULT_RESERVE
    per_peer: int = DEFAULT_PER_PEER
    active: int = field(default=0, init=False)  # touched only on the event loop's thread: no lock
    by_peer: Counter[str] = field(default_factory=Counter, init=False)
    pace: PeerPace = field(default_factory=PeerPace)

    def admits(self, path: str, peer: str) -> bool:
        """admits tells whether one more request of ``peer`` to ``path`` fits now."""
        bound = self.limit if is_reserved(path) else self.limit - self.reserve
        return self.active < bound and self.by_peer[peer] < self.per_peer

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        """__call__ is the ASGI entry point."""
        if scope["type"] != "http":
            await self.app(scope, receive, send)
            return
        peer = str(scope.get(PEER, "?"))  # no peer (an in-process caller): one shared share
        if not self.admits(scope["path"], peer):
            await answer_busy(send, "the API is serving as many requests as it may for you")
            return
        self.active += 1
        self.by_peer[peer] += 1
        try:
            if PEER in scope and not await self._paced(peer, scope):
                await answer_busy(send, "you are sending requests faster than the API serves one caller")
                return
            await self.app(scope, receive, send)
        finally:
            self.active -= 1
            self.by_peer[peer] -= 1
            if self.by_peer[peer] <= 0:
                del self.by_peer[peer]

    async def _paced(self, peer: str, scope: Scope) -> bool:
        """_paced waits for the peer's tokens; False when it would wait longer than it may (nothing taken)."""
        wait = self.pace.delay(peer, request_cost(scope))
        if wait is None:
            return False
        if wait > 0:
            await asyncio.sleep(wait)
        return True
