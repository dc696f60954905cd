"""The address jobs call: ``serve --job-api`` must be an API address; job-side calls wait for a restarting daemon."""

from __future__ import annotations

import socket
import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.client import ApiClient, ApiUnreachable, Unanswered
from cli.main import cli
from meta.service.api import Service
from tests.api_support import running_api
from tests.conftest import sqlite_database


def test_a_bad_job_api_refuses_the_start_in_one_line(tmp_path: Path) -> None:
    argv = ["--db", f"sqlite:///{tmp_path / 'db.sqlite'}", "serve", "--once", "--job-api", "ftp://head:21"]
    result = CliRunner().invoke(cli, argv, env={"METASCHED_STATE_DIR": str(tmp_path / "state")}, prog_name="metasched")
    assert result.exit_code == 2
    assert result.stderr.startswith("metasched: error: bad --job-api: not an API address") and result.stderr.count("\n") == 1
    assert not (tmp_path / "db.sqlite").exists()  # refused before the store was opened


def test_a_job_side_call_waits_for_a_restarting_daemon(tmp_path: Path) -> None:
    service = Service(sqlite_database(tmp_path / "db.sqlite"))
    address = f"unix://{tmp_path}/api.sock"
    with pytest.raises(ApiUnreachable, match="no such socket"):
        ApiClient(address, credential=lambda *_: "uid=0").call("GET", "/v1/whoami")  # no wait: at once
    done = threading.Event()

    def serve_later() -> None:
        time.sleep(0.8)  # the daemon comes back on the same socket
        with running_api(service, tmp_path):
            done.wait(30)

    thread = threading.Thread(target=serve_later)
    thread.start()
    try:
        started = time.monotonic()
        answer = ApiClient(address, credential=lambda *_: "uid=0", connect_wait_s=20).call("GET", "/v1/whoami")
        assert answer["uid"] == 0 and 0.5 < time.monotonic() - started < 20
    finally:
        done.set()
        thread.join()
        service.db.dispose()


def _read_request(connection: socket.socket) -> bytes:
    """_read_request reads one whole request (headers, then Content-Length bytes: http.client sends them apart)."""
    data = b""
    while b"\r\n\r\n" not in data:
        data += connection.recv(65536)
    head, _, body = data.partition(b"\r\n\r\n")
    length = int(next(line.split(b":")[1] for line in head.split(b"\r\n") if line.lower().startswith(b"content-length")))
    while len(body) < length:
        body += connection.recv(65536)
    return data


def _drop_first_then_answer(path: Path, seen: list[bytes]) -> threading.Thread:
    """_drop_first_then_answer serves two connections: the first is read and closed unanswered, the second answered."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(2)

    def serve() -> None:
        with listener:
            for answer in (None, b'{"task_id": "t", "attempt_id": "a", "files": 1}'):
                connection, _ = listener.accept()
                with connection:
                    seen.append(_read_request(connection))
                    if answer is not None:
                        connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\n"
                                           b"Content-Length: %d\r\nConnection: close\r\n\r\n%s" % (len(answer), answer))

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_an_unanswered_commit_is_sent_again_with_a_fresh_credential(tmp_path: Path) -> None:
    seen: list[bytes] = []
    thread = _drop_first_then_answer(tmp_path / "api.sock", seen)
    minted = iter(f"cred-{n}" for n in range(10))
    client = ApiClient(f"unix://{tmp_path}/api.sock", credential=lambda *_: next(minted), connect_wait_s=10)
    answer = client.call("POST", "/v1/attempts/a/commit", body={"token": 1}, retry_unanswered=True)
    thread.join(5)
    assert answer["files"] == 1 and len(seen) == 2
    assert b"MUNGE cred-0" in seen[0] and b"MUNGE cred-1" in seen[1]  # MUNGE refuses a replayed credential


def test_a_request_that_is_not_idempotent_is_never_sent_twice(tmp_path: Path) -> None:
    seen: list[bytes] = []
    _drop_first_then_answer(tmp_path / "api.sock", seen)
    client = ApiClient(f"unix://{tmp_path}/api.sock", credential=lambda *_: "uid=0", connect_wait_s=10)
    with pytest.raises(Unanswered, match="cannot reach the metasched API"):
        client.call("POST", "/v1/jobs", body={"name": "x"})
    assert len(seen) == 1


def _trickle_answer(path: Path, stop: threading.Event) -> threading.Thread:
    """_trickle_answer answers one request with a body that arrives a byte every 0.2 s (a lossy link's pace)."""
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(path))
    listener.listen(1)

    def serve() -> None:
        with listener:
            connection, _ = listener.accept()
            with connection:
                _read_request(connection)
                connection.sendall(b"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: 200\r\n\r\n")
                for _ in range(200):
                    if stop.wait(0.2):
                        return
                    try:
                        connection.sendall(b" ")
                    except OSError:
                        return

    thread = threading.Thread(target=serve, daemon=True)
    thread.start()
    return thread


def test_an_answer_that_trickles_in_ends_at_the_whole_call_timeout(tmp_path: Path) -> None:
    # each read gets a byte within the socket timeout, so only a deadline on the whole exchange ends it
    stop = threading.Event()
    thread = _trickle_answer(tmp_path / "api.sock", stop)
    client = ApiClient(f"unix://{tmp_path}/api.sock", credential=lambda *_: "uid=0", timeout=1.5)
    started = time.monotonic()
    try:
        with pytest.raises(Unanswered, match=r"no whole answer within 1.5 s after the request was sent"):
            client.call("POST", "/v1/jobs/j/cancel", body={})
        assert time.monotonic() - started < 5  # the body alone would take 40 s
    finally:
        stop.set()
        thread.join(5)
