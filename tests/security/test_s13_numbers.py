"""S13: an admin's NaN, Infinity or 1e400 is a 400 with a message, never a 500 (issue 22).

Through the real service (PostgreSQL, MUNGE), as oscar (Slurm AdminLevel Operator): ``PUT
/v1/tenants/tenant-a`` with each numeric field (the weight, every submit limit) set to NaN,
Infinity, -Infinity and 1e400 (Python's JSON reader takes all four) answers 400 with one line
naming the field, and nothing changes; the installed CLI's ``tenant set --submit-rate nan`` exits 2
with one line. alice's job-side numbers (a retry's task, a checkpoint's token) likewise.
"""

from __future__ import annotations

import http.client
import json
import socket
from pathlib import Path

import pytest

from tenants.credential import request_payload
from tests.identity.conftest import Served
from tests.identity.users import Call, munge_as, run_all

pytestmark = [pytest.mark.slurm, pytest.mark.postgres]

BAD = ("NaN", "Infinity", "-Infinity", "1e400")
FIELDS = ("submit.max_pending", "submit.max_pending_per_user", "submit.max_pending_tasks", "submit.rate",
          "submit.burst", "weight")  # fmt: skip


def _send_as(user: str, sock: Path, method: str, target: str, body: bytes) -> tuple[int, dict]:
    """_send_as sends one request with ``user``'s MUNGE credential bound to it over the API's Unix socket."""
    credential = munge_as(user, payload=request_payload(method, target, body))
    connection = http.client.HTTPConnection("localhost", timeout=60)
    unix = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    unix.connect(str(sock))
    connection.sock = unix
    try:
        connection.request(method, target, body=body, headers={"Authorization": f"MUNGE {credential}",
                                                               "Content-Type": "application/json"})  # fmt: skip
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def _body(field: str, number: str) -> bytes:
    if field.startswith("submit."):
        return f'{{"submit": {{"{field.removeprefix("submit.")}": {number}}}}}'.encode()
    return f'{{"{field}": {number}}}'.encode()


def test_non_finite_tenant_settings_are_a_400_naming_the_field(served: Served) -> None:
    before = _send_as("oscar", served.socket, "GET", "/v1/tenants/tenant-a", b"")
    answers = {}
    for field in FIELDS:
        for number in BAD:
            answers[(field, number)] = _send_as("oscar", served.socket, "PUT", "/v1/tenants/tenant-a",
                                                _body(field, number))  # fmt: skip
    for (field, number), (status, answer) in answers.items():
        assert status == 400, (field, number, status, answer)
        message = answer["message"]
        assert field.rsplit(".", 1)[-1] in message and "\n" not in message, (field, number, message)
    after = _send_as("oscar", served.socket, "GET", "/v1/tenants/tenant-a", b"")
    assert after == before  # nothing was stored


def test_the_cli_refuses_a_nan_rate_in_one_line(served: Served) -> None:
    calls = [Call("oscar", ("tenant", "set", "tenant-a", option, value))
             for option, value in (("--submit-rate", "nan"), ("--submit-rate", "inf"), ("--weight", "nan"))]  # fmt: skip
    for done in run_all(calls, served.api, served.folder):
        assert done.code == 2, (done.stdout, done.stderr)
        line = done.stderr.strip()
        assert line and "\n" not in line and "Traceback" not in line, line


def test_absurd_job_side_numbers_are_a_400(served: Served) -> None:
    retry = _send_as("alice", served.socket, "POST", "/v1/jobs/00000000/retry", b'{"task": 1e400}')
    assert retry[0] == 400, retry
    huge = "1" + "0" * 400
    report = f'{{"token": {huge}, "step": 1, "path": "/x"}}'.encode()
    checkpoint = _send_as("alice", served.socket, "POST", "/v1/attempts/00000000-0000-0000-0000-000000000000/checkpoints",
                          report)  # fmt: skip
    assert checkpoint[0] == 400, checkpoint
