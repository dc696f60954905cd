"""Numbers a caller sends the API are finite and in range: NaN, Infinity and 1e400 are a 400, never a 500 (issue 22, S13).

Python's JSON reader takes ``NaN`` and ``Infinity`` and reads ``1e400`` as Infinity; each numeric
field the API takes (tenant set's weight and submit limits, a retry's task, a job-side report's
token, step, size and duration) is sent each of them, and huge whole numbers, over SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from meta.service.api import Service
from meta.service.http import create_app
from meta.service.submit_gate import SubmitGate
from meta.store.db import Database
from tests.api_support import ALICE, ROOT, TestAuthenticator, principal_for
from tests.conftest import sqlite_database

BAD = ("NaN", "Infinity", "-Infinity", "1e400")
HUGE = "1" + "0" * 400  # a whole number no store column holds
SUBMIT_KEYS = ("max_pending", "max_pending_per_user", "max_pending_tasks", "rate", "burst")


@pytest.fixture
def api(tmp_path: Path) -> Iterator[TestClient]:
    db: Database = sqlite_database(tmp_path / "numbers.db")
    service = Service(db)
    service.gate = SubmitGate(db)
    app = create_app(service, TestAuthenticator(), principal_for, secrets_root=tmp_path / "secrets")
    with TestClient(app, raise_server_exceptions=False) as client:
        yield client


def _put(api: TestClient, body: str) -> tuple[int, str]:
    answer = api.put(
        "/v1/tenants/tenant-a",
        headers={"Authorization": ROOT, "Content-Type": "application/json"},
        content=body,
    )
    return answer.status_code, answer.json().get("message", "")


@pytest.mark.parametrize("number", [*BAD, HUGE])
@pytest.mark.parametrize("key", SUBMIT_KEYS)
def test_a_non_finite_submit_limit_is_a_400_with_a_message(api: TestClient, key: str, number: str) -> None:
    status, message = _put(api, f'{{"submit": {{"{key}": {number}}}}}')
    assert status == 400, message
    assert key in message and "\n" not in message
    # nothing was stored: the tenant's view has no such setting, and submits still pass the gate
    shown = api.get("/v1/tenants/tenant-a", headers={"Authorization": ROOT})
    assert shown.status_code in (200, 404)
    if shown.status_code == 200:
        assert key not in shown.json()["submit_limits"]


@pytest.mark.parametrize("number", [*BAD, HUGE, "-1", "0"])
def test_a_non_finite_or_out_of_range_weight_is_a_400(api: TestClient, number: str) -> None:
    status, message = _put(api, f'{{"weight": {number}}}')
    assert status == 400, message
    assert "weight" in message


@pytest.mark.parametrize("number", ["1e400", HUGE, "-1"])
def test_a_retry_of_an_absurd_task_number_is_a_400(api: TestClient, number: str) -> None:
    answer = api.post(
        "/v1/jobs/00000000/retry", headers={"Authorization": ALICE, "Content-Type": "application/json"},
        content=f'{{"task": {number}}}',
    )  # fmt: skip
    assert answer.status_code == 400, answer.text


@pytest.mark.parametrize(
    ("field", "number"),
    [("token", "1e400"), ("token", HUGE), ("step", HUGE), ("size_bytes", HUGE), ("duration_s", "Infinity"),
     ("duration_s", "1e400"), ("duration_s", "NaN")],
)  # fmt: skip
def test_a_job_side_report_with_an_absurd_number_is_a_400(api: TestClient, field: str, number: str) -> None:
    body = {"token": "1", "step": "1", "path": '"/x"', "size_bytes": "1", "duration_s": "1.0", field: number}
    text = "{" + ", ".join(f'"{key}": {value}' for key, value in body.items()) + "}"
    answer = api.post(
        "/v1/attempts/00000000-0000-0000-0000-000000000000/checkpoints",
        headers={"Authorization": ALICE, "Content-Type": "application/json"}, content=text,
    )  # fmt: skip
    assert answer.status_code == 400, answer.text
    commit = api.post(
        "/v1/attempts/00000000-0000-0000-0000-000000000000/commit",
        headers={"Authorization": ALICE, "Content-Type": "application/json"},
        content=f'{{"token": {number}, "manifest": {{}}}}' if field == "token" else '{"token": 1, "manifest": {}}',
    )  # fmt: skip
    assert commit.status_code < 500, commit.text


def test_a_finite_setting_in_range_is_taken(api: TestClient) -> None:
    status, message = _put(api, '{"submit": {"max_pending_tasks": 1000, "rate": 2.5}}')
    assert status == 200, message
    shown = api.get("/v1/tenants/tenant-a", headers={"Authorization": ROOT}).json()
    assert shown["submit_limits"]["max_pending_tasks"] == 1000 and shown["submit_limits"]["rate"] == 2.5
