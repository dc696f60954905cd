"""The address jobs call: ``serve --job-api`` must be an API address; job-side calls wait for a restarting daemon."""

from __future__ import annotations

import threading
import time
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.client import ApiClient, ApiUnreachable
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
