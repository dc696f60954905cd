"""Bounded connections (issue 22, S1): the per-peer limiter, the request gate's reserve, the head deadline, the client's retry.

The server tests run the real ApiServer (uvicorn with the guarded protocol) on a Unix socket
with a trivial app and short limits, so each takes well under a second.
"""

from __future__ import annotations

import asyncio
import json
import os
import socket
import time
from collections.abc import Iterator
from pathlib import Path

import pytest

from cli.client import ApiClient, ApiError
from meta.service.connection_guard import ADMITTED, OVERFLOW, REFUSED, ConnectionLimits, PeerLimiter, peer_of
from meta.service.request_gate import PEER, RequestGate, is_reserved
from meta.service.server import ApiServer, Listen

HEAD_TIMEOUT_S = 0.5


# --- the per-peer limiter ---------------------------------------------------------------------


def test_a_peer_gets_its_limit_then_as_many_overflow_then_is_refused() -> None:
    limiter = PeerLimiter(per_peer=3)
    kinds = [limiter.open("uid:2006") for _ in range(7)]
    assert kinds == [ADMITTED] * 3 + [OVERFLOW] * 3 + [REFUSED]
    assert limiter.held("uid:2006") == 6  # the refused one was never counted


def test_one_peer_at_its_limit_leaves_the_others_theirs() -> None:
    limiter = PeerLimiter(per_peer=2)
    for _ in range(10):
        limiter.open("uid:2006")
    assert [limiter.open("uid:2001"), limiter.open("ip:10.0.0.1")] == [ADMITTED, ADMITTED]


def test_closing_frees_the_slot_and_forgets_an_idle_peer() -> None:
    limiter = PeerLimiter(per_peer=1)
    kinds = [limiter.open("uid:1") for _ in range(3)]
    assert kinds == [ADMITTED, OVERFLOW, REFUSED]
    limiter.close("uid:1", REFUSED)  # never counted: nothing changes
    assert limiter.held("uid:1") == 2
    limiter.close("uid:1", ADMITTED)
    assert limiter.open("uid:1") == ADMITTED
    limiter.close("uid:1", ADMITTED)
    limiter.close("uid:1", OVERFLOW)
    assert limiter.held("uid:1") == 0 and not limiter.admitted and not limiter.overflow


# --- the request gate -------------------------------------------------------------------------


@pytest.mark.parametrize(
    ("path", "reserved"),
    [
        ("/healthz", True),
        ("/v1/attempts/a1/commit", True),
        ("/v1/attempts/a1/checkpoints", True),
        ("/v1/attempts/a1/secrets/HF_TOKEN", True),
        ("/v1/attempts/a1/extra/commit", False),
        ("/v1/jobs", False),
        ("/v1/attempts/a1/commit/x", False),
    ],
)
def test_the_reserve_is_for_job_side_routes_and_health(path: str, reserved: bool) -> None:
    assert is_reserved(path) is reserved


def test_a_full_gate_answers_busy_to_ordinary_requests_and_serves_job_side_ones() -> None:
    async def scenario() -> list[int]:
        release = asyncio.Event()

        async def slow(scope, receive, send) -> None:  # noqa: ANN001 - ASGI
            await release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})
            await send({"type": "http.response.body", "body": b""})

        gate = RequestGate(slow, limit=3, reserve=1)
        statuses: list[int] = []

        async def request(path: str) -> None:
            async def send(message) -> None:  # noqa: ANN001 - ASGI
                if message["type"] == "http.response.start":
                    statuses.append(message["status"])

            await gate({"type": "http", "path": path}, _no_body, send)

        held = [asyncio.create_task(request("/v1/jobs")) for _ in range(2)]  # the ordinary share: 3 - 1
        await asyncio.sleep(0.01)
        await request("/v1/jobs")  # refused at once
        job_side = asyncio.create_task(request("/v1/attempts/a/commit"))  # the reserve takes it
        await asyncio.sleep(0.01)
        assert gate.active == 3
        await request("/healthz")  # the reserve is used up too
        release.set()
        await asyncio.gather(*held, job_side)
        assert gate.active == 0
        return statuses

    assert asyncio.run(scenario()) == [503, 503, 200, 200, 200]


def test_one_peer_gets_its_share_of_the_gate_even_on_job_side_paths() -> None:
    async def scenario() -> list[int]:
        release = asyncio.Event()

        async def slow(scope, receive, send) -> None:  # noqa: ANN001 - ASGI
            await release.wait()
            await send({"type": "http.response.start", "status": 200, "headers": []})

        gate = RequestGate(slow, limit=10, reserve=2, per_peer=2)
        statuses: list[int] = []

        async def request(path: str, peer: str) -> None:
            async def send(message) -> None:  # noqa: ANN001 - ASGI
                if message["type"] == "http.response.start":
                    statuses.append(message["status"])

            await gate({"type": "http", "path": path, PEER: peer}, _no_body, send)

        commit = "/v1/attempts/a/commit"
        held = [asyncio.create_task(request(commit, "uid:2006")) for _ in range(2)]
        await asyncio.sleep(0.01)
        await request(commit, "uid:2006")  # her share is used up: refused though the gate has room
        alice = asyncio.create_task(request(commit, "uid:2001"))
        await asyncio.sleep(0.01)
        release.set()
        await asyncio.gather(*held, alice)
        assert not gate.by_peer  # nothing left behind per peer
        return statuses

    assert asyncio.run(scenario()) == [503, 200, 200, 200]


async def _no_body() -> dict:
    return {"type": "http.request", "body": b"", "more_body": False}


# --- the real server --------------------------------------------------------------------------


async def _echo(scope, receive, send) -> None:  # noqa: ANN001 - ASGI
    """_echo answers 200 with the path and the peer the connection layer named."""
    body = json.dumps({"path": scope["path"], "peer": scope.get(PEER)}).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode())]
    await send({"type": "http.response.start", "status": 200, "headers": headers})
    await send({"type": "http.response.body", "body": body})


@pytest.fixture
def server(tmp_path: Path) -> Iterator[Path]:
    """server is an ApiServer (per peer: 3, head timeout 0.5 s) on a Unix socket; its path."""
    path = tmp_path / "api.sock"
    limits = ConnectionLimits(per_peer=3, head_timeout_s=HEAD_TIMEOUT_S, body_timeout_s=1.0)
    api = ApiServer(_echo, Listen(socket_path=path), limits)
    api.start()
    yield path
    api.stop()


def _open(path: Path) -> socket.socket:
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.settimeout(5)
    sock.connect(str(path))
    return sock


def _status(sock: socket.socket, path: str = "/v1/jobs") -> int:
    """_status sends one GET and returns the answer's status (OSError when the server closed the connection)."""
    sock.sendall(f"GET {path} HTTP/1.1\r\nHost: x\r\n\r\n".encode())
    head = sock.recv(65536)
    if not head:
        raise ConnectionResetError("closed without an answer")
    return int(head.split(b" ", 2)[1])


def test_over_its_limit_a_peer_gets_busy_except_for_job_side_calls_then_is_closed(server: Path) -> None:
    held = [_open(server) for _ in range(3)]  # the limit, idle
    time.sleep(0.05)
    assert _status(_open(server)) == 503
    assert _status(_open(server), "/v1/attempts/a/commit") == 200
    assert _status(_open(server), "/healthz") == 200
    overflow = [_open(server) for _ in range(3)]  # the overflow, idle too
    time.sleep(0.05)
    with pytest.raises(OSError):
        _status(_open(server))  # beyond both: closed at once
    for sock in held + overflow:
        sock.close()
    time.sleep(0.05)
    assert _status(_open(server)) == 200  # the slots are free again


def test_each_request_names_its_connections_peer(server: Path) -> None:
    sock = _open(server)
    sock.sendall(b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nConnection: close\r\n\r\n")
    answer = b""
    while chunk := sock.recv(65536):
        answer += chunk
    assert json.loads(answer.split(b"\r\n\r\n", 1)[1]) == {"path": "/v1/jobs", "peer": f"uid:{os.getuid()}"}


def test_an_idle_connection_is_closed_after_the_head_timeout(server: Path) -> None:
    sock = _open(server)
    started = time.monotonic()
    assert sock.recv(1) == b""  # closed by the server, having sent nothing
    assert HEAD_TIMEOUT_S * 0.8 <= time.monotonic() - started < HEAD_TIMEOUT_S + 2


def test_a_slow_sender_does_not_extend_the_head_deadline(server: Path) -> None:
    sock = _open(server)
    started = time.monotonic()
    with pytest.raises(OSError):
        for byte in b"GET /v1/jobs HTTP/1.1\r\nHost: x\r\nX-Pad: " + b"a" * 100:
            sock.send(bytes([byte]))  # a byte every 50 ms: uvicorn's keep-alive timer would restart each time
            time.sleep(0.05)
    assert time.monotonic() - started < HEAD_TIMEOUT_S + 2


def test_a_kept_alive_connection_must_send_its_next_head_in_time(server: Path) -> None:
    sock = _open(server)
    assert _status(sock) == 200
    started = time.monotonic()
    while sock.recv(65536):  # the rest of the answer, then the server's close
        pass
    assert time.monotonic() - started < HEAD_TIMEOUT_S + 1  # not uvicorn's 5 s keep-alive


def test_the_peer_on_a_unix_socket_is_its_uid_and_on_tcp_its_address(tmp_path: Path) -> None:
    class Transport(asyncio.BaseTransport):
        def __init__(self, sock: socket.socket):
            super().__init__()
            self.sock = sock

        def get_extra_info(self, name: str, default=None):  # noqa: ANN001, ANN201 - asyncio's signature
            return {"socket": self.sock, "peername": self.sock.getpeername()}.get(name, default)

    left, right = socket.socketpair(socket.AF_UNIX)
    listener = socket.create_server(("127.0.0.1", 0))
    client = socket.create_connection(listener.getsockname())
    accepted, _ = listener.accept()
    try:
        assert peer_of(Transport(left)) == f"uid:{os.getuid()}"
        assert peer_of(Transport(accepted)) == "ip:127.0.0.1"
    finally:
        for sock in (left, right, listener, client, accepted):
            sock.close()


# --- the client's retry -----------------------------------------------------------------------


def _busy_server(tmp_path: Path, busy_answers: int, error: str = "Busy") -> tuple[ApiServer, list[int]]:
    """_busy_server answers 503 ``error`` to the first ``busy_answers`` requests, then 200 []; its request count."""
    seen = [0]

    async def app(scope, receive, send) -> None:  # noqa: ANN001 - ASGI
        seen[0] += 1
        busy = seen[0] <= busy_answers
        body = json.dumps({"error": error, "message": "busy; try again"} if busy else []).encode()
        await send({"type": "http.response.start", "status": 503 if busy else 200, "headers": []})
        await send({"type": "http.response.body", "body": body})

    api = ApiServer(app, Listen(socket_path=tmp_path / "api.sock"))
    api.start()
    return api, seen


def test_the_client_sends_again_while_the_service_is_busy(tmp_path: Path) -> None:
    api, seen = _busy_server(tmp_path, busy_answers=2)
    try:
        client = ApiClient(f"unix://{tmp_path / 'api.sock'}", lambda m, t, b: "cred", busy_wait_s=5)
        assert client.call("POST", "/v1/jobs", body={"x": 1}) == []
        assert seen[0] == 3
    finally:
        api.stop()


def test_the_client_gives_up_when_busy_lasts_past_its_wait(tmp_path: Path) -> None:
    api, seen = _busy_server(tmp_path, busy_answers=1000)
    try:
        client = ApiClient(f"unix://{tmp_path / 'api.sock'}", lambda m, t, b: "cred", busy_wait_s=1.0)
        started = time.monotonic()
        with pytest.raises(ApiError) as busy:
            client.call("GET", "/v1/jobs")
        assert (busy.value.status, busy.value.error) == (503, "Busy")
        assert 2 <= seen[0] <= 4 and time.monotonic() - started < 3
    finally:
        api.stop()


def test_a_503_that_is_not_busy_is_not_sent_again(tmp_path: Path) -> None:
    api, seen = _busy_server(tmp_path, busy_answers=1000, error="Unavailable")  # e.g. the database is down
    try:
        client = ApiClient(f"unix://{tmp_path / 'api.sock'}", lambda m, t, b: "cred", busy_wait_s=5)
        with pytest.raises(ApiError):
            client.call("POST", "/v1/jobs", body={})
        assert seen[0] == 1
    finally:
        api.stop()
