"""metasched status says where the daemon's own jobs log: ``runs_as_daemon`` and the API's ``serve --log-dir`` (issue 20)."""

from __future__ import annotations

import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from cli.log_paths import attempt_logs
from meta.service.api import Service
from meta.service.http import create_app
from meta.service.web.auth import WebSettings
from tests.api_support import ALICE, TestAuthenticator, principal_for

TRAIN = (Path(__file__).resolve().parents[2] / "examples" / "train.yaml").read_text()  # tenant-a


@pytest.fixture
def api(service: Service, tmp_path: Path) -> Iterator[TestClient]:
    web = WebSettings.ephemeral()
    web.log_dir = "/var/lib/metasched-quickstart/logs"
    app = create_app(service, TestAuthenticator(), principal_for, secrets_root=tmp_path / "secrets", web=web)
    with TestClient(app) as client:
        yield client


def _status(api: TestClient, ref: str) -> dict:
    answer = api.get(f"/v1/jobs/{ref}", headers={"Authorization": ALICE})
    assert answer.status_code == 200, answer.text
    return answer.json()


def test_a_job_of_the_daemons_user_logs_in_the_daemons_log_folder(api: TestClient, service: Service) -> None:
    created = api.post("/v1/jobs", headers={"Authorization": ALICE}, json={"spec_text": TRAIN, "submit_dir": "/srv/ck"})
    job = created.json()["short_id"]
    as_user = _status(api, job)  # alice's job under another user's daemon: sbatch's default in the submit folder
    assert (as_user["runs_as_daemon"], as_user["log_dir"]) == (False, None)
    assert attempt_logs(as_user, {"id": "a1", "slurm_job_id": "41"})[0] == "/srv/ck/slurm-41.out"

    service.daemon_uid = 1001  # alice runs serve herself (root's quickstart, local mode): the job is the daemon's
    own = _status(api, job)
    assert (own["runs_as_daemon"], own["log_dir"]) == (True, "/var/lib/metasched-quickstart/logs")
    assert attempt_logs(own, {"id": "a1", "slurm_job_id": "41"}) == (
        f"/var/lib/metasched-quickstart/logs/{job}/a1.out",
    ) * 2
