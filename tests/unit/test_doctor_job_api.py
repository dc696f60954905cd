"""metasched doctor, the job API: the address jobs get, the probe, and the decision."""

from __future__ import annotations

import json
import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, HTTPServer
from pathlib import Path

import pytest

from meta.serve.doctor.check import Status
from meta.serve.doctor.job_api import ProbeResult, job_api_address, job_api_check, local_probe, parse_probe
from meta.serve.settings import DEFAULTS, with_overrides


class _Health(BaseHTTPRequestHandler):
    """_Health answers /healthz as the API does, anything else 404."""

    def do_GET(self) -> None:  # noqa: N802 - http.server's name
        body = json.dumps({"status": "ok"}).encode() if self.path == "/healthz" else b"{}"
        self.send_response(200 if self.path == "/healthz" else 404)
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    def log_message(self, *_args: object) -> None:
        """log_message keeps the test output quiet."""


@pytest.fixture
def api() -> Iterator[str]:
    """api is an HTTP server answering /healthz like metasched's API."""
    server = HTTPServer(("127.0.0.1", 0), _Health)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"http://127.0.0.1:{server.server_address[1]}"
    server.shutdown()
    server.server_close()


def test_the_address_is_job_api_else_the_socket_else_the_tcp_listener(tmp_path: Path) -> None:
    assert job_api_address(with_overrides(DEFAULTS, {"job_api": "http://head:9465"})) == ("http://head:9465", None)
    socket = with_overrides(DEFAULTS, {"api_socket": str(tmp_path / "api.sock")})
    assert job_api_address(socket) == (f"unix://{tmp_path / 'api.sock'}", None)
    tcp = with_overrides(DEFAULTS, {"api_socket": "off", "api_listen": "10.0.0.1:9465"})
    assert job_api_address(tcp) == ("http://10.0.0.1:9465", None)
    nowhere = with_overrides(DEFAULTS, {"api_socket": "off", "api_listen": "off"})
    assert job_api_address(nowhere)[0] is None


def test_the_local_probe_reaches_an_api_and_names_what_refuses(api: str) -> None:
    assert local_probe(api).ok
    closed = local_probe("http://127.0.0.1:1")
    assert not closed.ok and "ConnectionRefusedError" in (closed.error or "")
    missing = local_probe("unix:///nonexistent/api.sock")
    assert not missing.ok and "FileNotFoundError" in (missing.error or "")


def test_parse_probe_reads_the_last_json_line() -> None:
    assert parse_probe('noise\n{"ok": true, "host": "t4n1", "error": null}\n') == (ProbeResult("t4n1", True), None)
    result, error = parse_probe("srun: error: nothing\n")
    assert result is None and "no answer" in (error or "")


def test_answering_from_a_node_passes_and_refusing_fails() -> None:
    address = "http://head:9465"
    assert job_api_check(address, None, ProbeResult("t4n1", True), None, None).status is Status.OK
    check = job_api_check(address, None, ProbeResult("t4n1", False, "ConnectionRefusedError"), None, None)
    assert check.status is Status.FAIL and "from compute node t4n1" in check.message and "--job-api" in check.message


def test_no_node_available_falls_back_to_this_host() -> None:
    address = "http://head:9465"
    here = job_api_check(address, None, None, "srun: Unable to allocate resources", ProbeResult("head", True))
    assert here.status is Status.WARN and "no compute node was tried" in here.message
    nowhere = job_api_check(address, None, None, "srun: ...", ProbeResult("head", False, "refused"))
    assert nowhere.status is Status.FAIL and "even on this host" in nowhere.message


def test_no_address_or_a_wildcard_one() -> None:
    assert job_api_check(None, "no listener", None, None, None).status is Status.FAIL
    check = job_api_check("http://0.0.0.0:9465", None, ProbeResult("n1", True), None, None)
    assert check.status is Status.WARN and "its own" not in check.message and "that node itself" in check.message
