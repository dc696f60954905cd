"""The job's submit directory (docs/identity.md §5): stored from the API body, the CLI and msbatch; bad ones refused at submit."""

from __future__ import annotations

import json
import os
import warnings
from collections.abc import Iterator
from pathlib import Path

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from meta.service.api import Service
from meta.service.http import create_app
from meta.store.models import Job
from tests.api_support import ALICE, TestAuthenticator, principal_for, running_api
from tests.cli.test_api_cli import runner

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRAIN = (EXAMPLES / "train.yaml").read_text()  # tenant-a


@pytest.fixture
def api(service: Service, tmp_path: Path) -> Iterator[TestClient]:
    app = create_app(service, TestAuthenticator(), principal_for, secrets_root=tmp_path / "secrets")
    with TestClient(app) as client:
        yield client


def _submit(api: TestClient, submit_dir: object) -> object:
    return api.post("/v1/jobs", headers={"Authorization": ALICE}, json={"spec_text": TRAIN, "submit_dir": submit_dir})


def _stored(service: Service, job_id: str) -> str | None:
    with service.db.session() as session:
        job = session.get(Job, job_id)
        assert job is not None
        return job.submit_dir


def test_the_submit_dir_is_stored(api: TestClient, service: Service) -> None:
    created = _submit(api, "/home/alice/exp one")
    assert created.status_code == 201, created.text
    assert _stored(service, created.json()["id"]) == "/home/alice/exp one"
    without = _submit(api, None)
    assert _stored(service, without.json()["id"]) is None


@pytest.mark.parametrize(
    ("submit_dir", "words"),
    [
        ("relative/dir", "is not an absolute path"),
        ("", "is not an absolute path"),
        ("/home/alice/a\x00b", "contains a control character"),
        ("/home/alice/a\nb", "contains a control character"),
        ("/home/alice/\x1b[31m", "contains a control character"),
        ("/" + "d" * 4096, "is longer than 4096 bytes"),
    ],
    ids=["relative", "empty", "nul", "newline", "escape", "long"],
)
def test_a_bad_submit_dir_is_refused_in_one_line(api: TestClient, service: Service, submit_dir: str, words: str) -> None:
    answer = _submit(api, submit_dir)
    assert answer.status_code == 400, answer.text
    body = answer.json()
    assert body["error"] == "InvalidRequest" and words in body["message"] and "\n" not in body["message"]
    assert service.list_jobs() == []  # nothing stored


def test_metasched_submit_and_msbatch_send_the_working_folder(service: Service, tmp_path: Path) -> None:
    from cli.sbatch.msbatch import main as msbatch

    work = tmp_path / "work dir"
    work.mkdir()
    (work / "train.yaml").write_text(TRAIN)
    with running_api(service, tmp_path) as running:
        run = runner(running.address, tmp_path)
        before = os.getcwd()
        os.chdir(work)
        try:
            job = json.loads(run("submit", "-f", "train.yaml", "--json", uid=1001).stdout)
            batch = run("-A", "tenant-a", "--parsable", "--wrap", "true", uid=1001, prog=msbatch)
        finally:
            os.chdir(before)
    assert batch.exit_code == 0, batch.output
    assert _stored(service, job["id"]) == str(work)
    short = batch.stdout.strip()
    (other,) = [j for j in service.list_jobs() if j.short_id == short]
    assert _stored(service, other.id) == str(work)
