"""Bounded connections: who is on the other end of each connection, how many they hold, how long they may idle.

Issue 22, S1: 256 connections that send nothing made uvicorn answer 503 to everyone. Three rules
replace that one global count:

- **Per-peer limit.** A peer is a Unix user on the socket (``SO_PEERCRED``: the kernel says who,
  the caller cannot lie) or an IP address on TCP. Each peer may hold ``per_peer`` connections;
  the next ``per_peer`` are *overflow*: they are read up to their request head and then answered
  ``503 Busy`` — unless they are a job-side call or a health check, which go on to the request
  gate's reserve (meta/service/request_gate.py), so a user's own flood cannot fail their jobs'
  commits. Beyond overflow, a connection is closed at once: a peer holds at most ``2 × per_peer``
  sockets, so no peer can run the daemon out of file descriptors.
- **Head timeout.** A connection must send a complete request head within ``head_timeout_s`` of
  opening (or of its previous answer); sending a byte now and then does not extend it (uvicorn's
  keep-alive timer restarts on every byte, which is what a slow sender exploits).
- **Body timeout.** Once the head is in, the body must be complete within ``body_timeout_s``.

All of it runs on the event loop's thread (asyncio protocols), so the counters need no lock.
"""

from __future__ import annotations

import asyncio
import socket
import struct
from collections import Counter
from dataclasses import dataclass, field

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from meta.service.http_guard import ASGIApp, Receive, Scope, Send
from meta.service.request_gate import PEER, answer_busy, is_reserved

DEFAULT_PER_PEER = 64  # a user's CLI and their running jobs' calls, at once; more waits and retries
DEFAULT_HEAD_TIMEOUT_S = 5.0  # a real client sends its head in one write, in microseconds
DEFAULT_BODY_TIMEOUT_S = 60.0  # a 4 MiB body over a slow link; nothing in the API sends more

ADMITTED, OVERFLOW, REFUSED = "admitted", "overflow", "refused"
_PEERCRED = struct.Struct("3i")  # struct ucred: pid, uid, gid


@dataclass(frozen=True)
class ConnectionLimits:
    """ConnectionLimits are the per-peer bound and the head and body timeouts (tests shorten them)."""

    per_peer: int = DEFAULT_PER_PEER
    head_timeout_s: float = DEFAULT_HEAD_TIMEOUT_S
    body_timeout_s: float = DEFAULT_BODY_TIMEOUT_S


@dataclass
class PeerLimiter:
    """PeerLimiter counts each peer's open connections and classes a new one: admitted, overflow or refused."""

    per_peer: int = DEFAULT_PER_PEER
    admitted: Counter[str] = field(default_factory=Counter)
    overflow: Counter[str] = field(default_factory=Counter)

    def open(self, peer: str) -> str:
        """open records a new connection of ``peer`` and says what it may do (nothing is recorded when refused)."""
        if self.admitted[peer] < self.per_peer:
            self.admitted[peer] += 1
            return ADMITTED
        if self.overflow[peer] < self.per_peer:
            self.overflow[peer] += 1
            return OVERFLOW
        return REFUSED

    def close(self, peer: str, kind: str) -> None:
        """close forgets one connection of ``peer`` opened as ``kind`` (a refused one was never counted)."""
        counts = self.admitted if kind == ADMITTED else self.overflow if kind == OVERFLOW else None
        if counts is None:
            return
        counts[peer] -= 1
        if counts[peer] <= 0:
            del counts[peer]  # no entry per peer that ever connected: the table stays as small as the crowd

    def held(self, peer: str) -> int:
        """held is how many connections ``peer`` has open now (admitted and overflow)."""
        return self.admitted[peer] + self.overflow[peer]


def peer_of(transport: asyncio.BaseTransport) -> str:
    """peer_of names the other end: ``uid:N`` on a Unix socket (SO_PEERCRED), ``ip:ADDR`` on TCP."""
    sock = transport.get_extra_info("socket")
    if sock is not None and sock.family == socket.AF_UNIX:
        try:
            _pid, uid, _gid = _PEERCRED.unpack(
                sock.getsockopt(socket.SOL_SOCKET, socket.SO_PEERCRED, _PEERCRED.size)
            )
        except OSError:
            return "uid:?"  # one shared bucket for the unexplained: never a free pass
        return f"uid:{uid}"
    peer = transport.get_extra_info("peername")
    if isinstance(peer, tuple) and peer:
        return f"ip:{peer[0]}"
    return "ip:?"


def peer_app(app: ASGIApp, peer: str) -> ASGIApp:
    """peer_app names the connection's peer in each request's scope (the request gate's per-peer share)."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        scope[PEER] = peer
        await app(scope, receive, send)

    return serve


def overflow_app(app: ASGIApp) -> ASGIApp:
    """overflow_app serves an overflow connection: job-side calls and health checks go on, the rest get 503 Busy."""

    async def serve(scope: Scope, receive: Receive, send: Send) -> None:
        if scope["type"] == "http" and not is_reserved(scope["path"]):
            await answer_busy(send, "too many connections from your user or address")
            return
        await app(scope, receive, send)

    return serve


def guarded_protocol(limits: ConnectionLimits) -> type[H11Protocol]:
    """guarded_protocol is uvicorn's h11 protocol with one PeerLimiter shared by every connection of a server."""
    limiter = PeerLimiter(limits.per_peer)

    class GuardedH11Protocol(H11Protocol):
        """GuardedH11Protocol is H11Protocol plus the per-peer limit and the head and body deadlines."""

        peers = limiter

        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            """connection_made classes the peer's connection; a refused one is closed before uvicorn sees it."""
            self._peer = peer_of(transport)
            self._kind = limiter.open(self._peer)
            self._phase: str | None = None
            self._deadline: asyncio.TimerHandle | None = None
            if self._kind == REFUSED:
                transport.abort()  # connection_lost follows; uvicorn never tracked it
                return
            super().connection_made(transport)
            self.app = peer_app(self.app, self._peer)
            if self._kind == OVERFLOW:
                self.app = overflow_app(self.app)
            self._watch()

        def connection_lost(self, exc: Exception | None) -> None:
            """connection_lost releases the peer's slot and the deadline, then lets uvicorn finish."""
            limiter.close(self._peer, self._kind)
            self._set_deadline(None)
            if self._kind != REFUSED:
                super().connection_lost(exc)

        def data_received(self, data: bytes) -> None:
            """data_received feeds uvicorn, then moves the deadline if the request reached its next phase."""
            super().data_received(data)
            self._watch()

        def on_response_complete(self) -> None:
            """on_response_complete starts the next request's head deadline (keep-alive is no excuse to idle)."""
            super().on_response_complete()
            self._watch()

        def _watch(self) -> None:
            """_watch arms the head deadline while waiting for a head, the body deadline while reading a body."""
            state = self.conn.their_state
            phase = "head" if state is h11.IDLE else "body" if state is h11.SEND_BODY else None
            if phase != self._phase:
                self._phase = phase
                self._set_deadline(phase)

        def _set_deadline(self, phase: str | None) -> None:
            if self._deadline is not None:
                self._deadline.cancel()
                self._deadline = None
            if phase is not None:
                delay = limits.head_timeout_s if phase == "head" else limits.body_timeout_s
                self._deadline = self.loop.call_later(delay, self._expire)

        def _expire(self) -> None:
            """_expire closes a connection that missed its deadline (no answer: it has not asked anything whole)."""
            self._deadline = None
            if not self.transport.is_closing():
                self.transport.close()

    return GuardedH11Protocol
