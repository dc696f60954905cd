"""``metasched serve`` starts the API beside the cycle (production wiring: MUNGE, associations) and stops it.

Slurm is absent here (an empty bin folder): the cycle fails its reads and retries, the API serves
anyway — as a standby replica's would. Requests carry no valid credential, so these checks need no
munged: the service refuses them before asking it.
"""

from __future__ import annotations

import http.client
import json
import os
import signal
import socket
import stat
import subprocess
import sys
import time
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]


def _serve(tmp_path: Path, *extra: str) -> list[str]:
    (tmp_path / "bin").mkdir(exist_ok=True)
    return [
        sys.executable, "-c", "from cli.main import main; main()",
        "--db", f"sqlite:///{tmp_path / 's.sqlite'}", "serve",
        "--state-dir", str(tmp_path / "state"), "--metrics-port", "0", "--period", "5",
        "--slurm-bin-dir", str(tmp_path / "bin"), "--log-level", "WARNING", *extra,
    ]  # fmt: skip


def _request(sock: Path, path: str, header: str | None = None) -> tuple[int, dict]:
    connection = http.client.HTTPConnection("localhost", timeout=5)
    connection.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    connection.sock.connect(str(sock))
    connection.request("GET", path, headers={"Authorization": header} if header else {})
    response = connection.getresponse()
    return response.status, json.loads(response.read())


def _wait_for(sock: Path, proc: subprocess.Popen) -> None:
    deadline = time.monotonic() + 30
    while not sock.exists():
        assert proc.poll() is None, proc.communicate()[1]
        assert time.monotonic() < deadline, "the API socket never appeared"
        time.sleep(0.1)


def test_serve_runs_the_api_and_removes_its_socket_on_sigterm(tmp_path: Path) -> None:
    sock = tmp_path / "run" / "api.sock"
    argv = _serve(tmp_path, "--api-socket", str(sock), "--api-listen", "127.0.0.1:0")
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(sock, proc)
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o666
        assert _request(sock, "/healthz") == (200, {"status": "ok"})
        for header in (None, "MUNGE MUNGE:forged:", "Basic x"):
            status, body = _request(sock, "/v1/jobs", header)
            assert (status, body["error"]) == (401, "Unauthenticated"), body
        again = subprocess.run(_serve(tmp_path, "--api-socket", str(sock), "--api-listen", "off"), cwd=REPO,
                               capture_output=True, text=True, timeout=60)
        assert again.returncode == 1 and again.stderr.count("\n") == 1, again.stderr
        assert "cannot start the API" in again.stderr and "in use" in again.stderr
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err
    assert not sock.exists()


def test_munge_socket_points_the_service_at_a_sites_munged(tmp_path: Path) -> None:
    dead = tmp_path / "munged.sock"  # a socket nobody listens on: this service's munged is "down"
    listener = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    listener.bind(str(dead))
    listener.close()
    sock = tmp_path / "run" / "api.sock"
    argv = _serve(tmp_path, "--api-socket", str(sock), "--api-listen", "off", "--munge-socket", str(dead))
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.PIPE, stderr=subprocess.PIPE, text=True)
    try:
        _wait_for(sock, proc)
        status, body = _request(sock, "/v1/jobs", "MUNGE MUNGE:AwQFAAAx:")  # well formed: decoded by that munged
        assert (status, body["error"]) == (503, "MungeUnavailable"), body
    finally:
        proc.send_signal(signal.SIGTERM)
        _, err = proc.communicate(timeout=30)
    assert proc.returncode == 0, err


@pytest.mark.parametrize(
    ("extra", "words"),
    [
        (["--api-listen", "nowhere"], "bad --api-listen"),
        (["--api-socket", "off", "--api-listen", "off"], "use --no-api"),
        (["--munge-socket", "/nonexistent/munge.socket.2"], "--munge-socket /nonexistent/munge.socket.2: not a socket"),
    ],
)
def test_a_bad_api_address_is_a_usage_error(tmp_path: Path, extra: list[str], words: str) -> None:
    done = subprocess.run(_serve(tmp_path, *extra), cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and words in done.stderr and done.stderr.count("\n") == 1, done.stderr


@pytest.mark.parametrize(
    ("extra", "words"),
    [(["--submit-rate", "0"], "--submit-rate"), (["--submit-burst", "0"], "--submit-burst")],
)
def test_a_submit_bucket_out_of_range_is_a_usage_error(tmp_path: Path, extra: list[str], words: str) -> None:
    done = subprocess.run(_serve(tmp_path, *extra), cwd=REPO, capture_output=True, text=True, timeout=60)
    assert done.returncode == 2 and words in done.stderr and "Traceback" not in done.stderr, done.stderr
