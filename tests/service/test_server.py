"""ApiServer (meta/service/server.py): the API in a thread on a Unix socket and TCP, as ``metasched serve`` runs it."""

from __future__ import annotations

import http.client
import json
import os
import socket
import stat
from pathlib import Path

import pytest

from cli.client import ApiClient, ApiError
from meta.service.api import Service
from meta.service.http import create_app
from meta.service.server import ApiServer, ApiStartError, Listen, parse_listen
from tests.api_support import TestAuthenticator, principal_for
from tests.conftest import sqlite_database


@pytest.fixture
def app(tmp_path: Path):  # noqa: ANN201 - an ASGI app
    service = Service(sqlite_database(tmp_path / "s.sqlite"))
    yield create_app(service, TestAuthenticator(), principal_for)
    service.db.dispose()


def _get(connection: http.client.HTTPConnection, path: str, who: str | None = None) -> tuple[int, dict]:
    connection.request("GET", path, headers={"Authorization": who} if who else {})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


class _Unix(http.client.HTTPConnection):
    def __init__(self, path: Path):
        super().__init__("localhost", timeout=5)
        self.path = str(path)

    def connect(self) -> None:
        self.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        self.sock.connect(self.path)


def test_serves_on_a_unix_socket_and_an_ephemeral_tcp_port(app, tmp_path: Path) -> None:
    path = tmp_path / "run" / "metasched" / "api.sock"
    server = ApiServer(app, Listen(socket_path=path, host="127.0.0.1", port=0))
    server.start()
    try:
        assert stat.S_IMODE(os.stat(path).st_mode) == 0o666  # MUNGE decides, not file modes
        assert stat.S_IMODE(os.stat(path.parent).st_mode) == 0o755
        unix, tcp = server.addresses()
        assert unix == f"unix://{path}" and tcp.startswith("http://127.0.0.1:")
        assert _get(_Unix(path), "/healthz") == (200, {"status": "ok"})
        port = int(tcp.rsplit(":", 1)[1])
        assert port > 0 and _get(http.client.HTTPConnection("127.0.0.1", port, timeout=5), "/healthz")[0] == 200
        status, body = _get(_Unix(path), "/v1/jobs")
        assert (status, body["error"]) == (401, "Unauthenticated")
        assert ApiClient(tcp, lambda m, t, b: "uid=0").call("GET", "/v1/jobs") == []
        with pytest.raises(ApiError) as refused:
            ApiClient(unix, lambda m, t, b: "garbage").call("GET", "/v1/jobs")
        assert (refused.value.status, refused.value.exit_code) == (401, 1)
    finally:
        server.stop()
    assert not path.exists()  # our socket goes with us


def test_a_stale_socket_is_replaced_but_a_live_one_is_not(app, tmp_path: Path) -> None:
    path = tmp_path / "api.sock"
    stale = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    stale.bind(str(path))
    stale.close()  # a daemon killed with -9 leaves exactly this behind
    first = ApiServer(app, Listen(socket_path=path))
    first.start()
    try:
        second = ApiServer(app, Listen(socket_path=path))
        with pytest.raises(ApiStartError, match="in use by another server"):
            second.start()
        assert _get(_Unix(path), "/healthz")[0] == 200  # the first one was left alone
    finally:
        first.stop()


def test_a_path_that_is_not_a_socket_is_never_replaced(app, tmp_path: Path) -> None:
    path = tmp_path / "api.sock"
    path.write_text("someone's file")
    with pytest.raises(ApiStartError, match="not a socket"):
        ApiServer(app, Listen(socket_path=path)).start()
    assert path.read_text() == "someone's file"


def test_a_taken_port_fails_the_start_in_one_line(app, tmp_path: Path) -> None:
    taken = socket.socket()
    taken.bind(("127.0.0.1", 0))
    taken.listen()
    port = taken.getsockname()[1]
    try:
        with pytest.raises(ApiStartError, match=f"cannot listen on 127.0.0.1:{port}"):
            ApiServer(app, Listen(socket_path=tmp_path / "api.sock", host="127.0.0.1", port=port)).start()
        assert not (tmp_path / "api.sock").exists()  # nothing half-started stays behind
    finally:
        taken.close()


@pytest.mark.parametrize(
    ("value", "want"),
    [("127.0.0.1:9465", ("127.0.0.1", 9465)), ("0.0.0.0:0", ("0.0.0.0", 0)), ("[::1]:80", ("::1", 80))],
)
def test_parse_listen(value: str, want: tuple[str, int]) -> None:
    assert parse_listen(value) == want


@pytest.mark.parametrize("value", ["9465", "host:", ":9465", "host:port", "host:70000", "host:１２"])
def test_parse_listen_refuses(value: str) -> None:
    with pytest.raises(ValueError, match="HOST:PORT"):
        parse_listen(value)
