"""Job-side calls prove the attempt (docs/identity.md §5): owner uid, attempt secret, current token; every call audited.

Through the API (FastAPI's TestClient, the test-only authenticator): alice (uid 1001, tenant-a)
owns the job; carol (1003) is another member of tenant-a; bob (1002) is of tenant-b; root is an
admin. Each refusal has its status and one line, and every call, allowed or refused, is an
audit line naming the caller — never a secret value or the attempt secret.
"""

from __future__ import annotations

import json
import logging
import warnings
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore")
    from fastapi.testclient import TestClient

from checkpoint import attempt_secret
from checkpoint.manifest_files import build_manifest
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.service.http import create_app
from meta.store import audit
from meta.store.lifecycle import attempt_event
from meta.store.models import Attempt
from tenants.identity import member
from tenants.secrets import set_secret
from tests.api_support import ALICE, BOB, ROOT, TestAuthenticator, alices_attempt, principal_for
from tests.runtime.support import checkpointing, inference, place, share

CAROL = "TEST uid=1003"
HF_VALUE = "hf_job-side-secret-VALUE-0123456789"
OTHER_VALUE = "wandb-never-declared-VALUE-987"


@pytest.fixture
def secrets_root(tmp_path: Path) -> Path:
    root = tmp_path / "secrets"
    set_secret(root, "tenant-a", "HF_TOKEN", HF_VALUE)
    set_secret(root, "tenant-a", "WANDB_API_KEY", OTHER_VALUE)
    set_secret(root, "tenant-b", "HF_TOKEN", "bobs-own-value-not-alices")
    return root


@pytest.fixture
def api(service: Service, secrets_root: Path) -> Iterator[TestClient]:
    app = create_app(service, TestAuthenticator(), principal_for, secrets_root=secrets_root)
    with TestClient(app) as client:
        yield client


def call(api: TestClient, method: str, url: str, who: str, **kwargs: Any) -> Any:
    return api.request(method, url, headers={"Authorization": who, **kwargs.pop("headers", {})}, **kwargs)


def refused(response: Any, status: int, kind: str, words: str) -> None:
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == kind and words in body["message"] and "\n" not in body["message"], body


def audit_lines(service: Service) -> list[dict[str, Any]]:
    with service.db.session() as session:
        return [line.to_dict() for line in audit.read(session, limit=1000)]


def report(attempt: str, secret: str | None, token: int = 1, step: int = 5) -> dict[str, Any]:
    return {"token": token, "step": step, "path": f"/ck/{step}", "secret": secret}


def test_a_checkpoint_report_needs_owner_secret_and_current_token(api: TestClient, service: Service) -> None:
    attempt, secret = alices_attempt(service, checkpointing(tenant="tenant-a"), submit_dir="/home/alice")
    url = f"/v1/attempts/{attempt}/checkpoints"
    refused(call(api, "POST", url, BOB, json=report(attempt, secret)), 404, "NotFound", "not found")
    refused(call(api, "POST", url, CAROL, json=report(attempt, secret)), 403, "Forbidden", "runs as uid 1001")
    refused(call(api, "POST", url, ROOT, json=report(attempt, secret)), 403, "Forbidden", "runs as uid 1001")
    refused(call(api, "POST", url, ALICE, json=report(attempt, None)), 403, "Forbidden", "no attempt secret")
    refused(call(api, "POST", url, ALICE, json=report(attempt, "x" * 43)), 403, "Forbidden", "a wrong attempt secret")
    refused(call(api, "POST", url, ALICE, json=report(attempt, secret, token=2)), 409, "StaleFencingToken", "token 2")
    answer = call(api, "POST", url, ALICE, json=report(attempt, secret, step=7))
    assert answer.status_code == 200 and answer.json()["step"] == 7
    lines = [line for line in audit_lines(service) if line["action"].startswith("checkpoint.report")]
    assert [(line["actor"], line["action"]) for line in reversed(lines)] == [
        ("bob", "checkpoint.report.refused"),
        ("carol", "checkpoint.report.refused"),
        ("root", "checkpoint.report.refused"),
        ("alice", "checkpoint.report.refused"),
        ("alice", "checkpoint.report.refused"),
        ("alice", "checkpoint.report.refused"),
        ("alice", "checkpoint.report"),
    ]
    assert {line["detail"].get("error") for line in lines[1:]} == {"NotFound", "Forbidden", "StaleFencingToken"}
    assert all(line["tenant"] == "tenant-a" for line in lines)  # alice's tenant sees who tried
    assert secret not in json.dumps(lines)


def test_an_output_commit_needs_the_proof_too(api: TestClient, service: Service, tmp_path: Path) -> None:
    attempt, secret = alices_attempt(service, inference(str(tmp_path / "out"), tenant="tenant-a"), submit_dir="/home/alice")
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "part-0.jsonl").write_text("{}\n")
    body = {"token": 1, "manifest": build_manifest(staging), "secret": secret}
    url = f"/v1/attempts/{attempt}/commit"
    refused(call(api, "POST", url, BOB, json=body), 404, "NotFound", "not found")
    refused(call(api, "POST", url, CAROL, json=body), 403, "Forbidden", "runs as uid 1001")
    refused(call(api, "POST", url, ALICE, json={**body, "secret": None}), 403, "Forbidden", "no attempt secret")
    refused(call(api, "POST", url, ALICE, json={**body, "secret": secret[:-1] + ("A" if secret[-1] != "A" else "B")}), 403, "Forbidden", "wrong")
    refused(call(api, "POST", url, ALICE, json={**body, "token": 9}), 409, "StaleFencingToken", "token 9")
    assert call(api, "POST", url, ALICE, json=body).status_code == 200
    actions = [(line["actor"], line["action"]) for line in audit_lines(service) if "commit" in line["action"]]
    assert actions[0] == ("alice", "output.commit") and len(actions) == 6
    assert ("bob", "output.commit.refused") in actions and ("carol", "output.commit.refused") in actions


def test_an_attempt_without_a_secret_cannot_be_proven(api: TestClient, service: Service) -> None:
    attempt, _ = alices_attempt(service, checkpointing(tenant="tenant-a"), submit_dir="/home/alice")
    with service.db.session() as session:
        row = session.get(Attempt, attempt)
        assert row is not None
        row.secret_hash = None  # launched before attempt secrets existed
    url = f"/v1/attempts/{attempt}/checkpoints"
    refused(call(api, "POST", url, ALICE, json=report(attempt, "anything-at-all-0123")), 403, "Forbidden", "wrong")


def test_an_ownerless_job_runs_as_the_daemon_and_only_its_uid_proves_it(api: TestClient, service: Service) -> None:
    job = service.submit(checkpointing(tenant="tenant-a")).job  # no owner: runs as the daemon (root here)
    task = service.status(job.id).tasks[0].id
    attempt = place(service.db, task, [share("node1")], AttemptState.RUNNING)
    secret, digest = attempt_secret.new_secret()
    with service.db.session() as session:
        session.get(Attempt, attempt).secret_hash = digest  # type: ignore[union-attr]
    url = f"/v1/attempts/{attempt}/checkpoints"
    refused(call(api, "POST", url, ALICE, json=report(attempt, secret)), 403, "Forbidden", "runs as uid 0")
    assert call(api, "POST", url, ROOT, json=report(attempt, secret)).status_code == 200


def secret_url(attempt: str, name: str = "HF_TOKEN", token: int = 1) -> str:
    return f"/v1/attempts/{attempt}/secrets/{name}?token={token}"


def test_a_job_reads_its_declared_secrets_with_the_proof(
    api: TestClient, service: Service, caplog: pytest.LogCaptureFixture
) -> None:
    caplog.set_level(logging.DEBUG)
    attempt, secret = alices_attempt(service, checkpointing(tenant="tenant-a", secrets=["HF_TOKEN"]), submit_dir="/home/alice")
    proof = {"X-Metasched-Attempt-Secret": secret}
    answer = call(api, "GET", secret_url(attempt), ALICE, headers=proof)
    assert answer.status_code == 200 and answer.json() == {"name": "HF_TOKEN", "value": HF_VALUE}
    refused(call(api, "GET", secret_url(attempt), BOB, headers=proof), 404, "NotFound", "not found")
    refused(call(api, "GET", secret_url(attempt), CAROL, headers=proof), 403, "Forbidden", "runs as uid 1001")
    refused(call(api, "GET", secret_url(attempt), ALICE), 403, "Forbidden", "no attempt secret")
    refused(call(api, "GET", secret_url(attempt), ALICE, headers={"X-Metasched-Attempt-Secret": "wrong-secret-0123"}),
            403, "Forbidden", "wrong")  # fmt: skip
    refused(call(api, "GET", secret_url(attempt, token=2), ALICE, headers=proof), 409, "StaleFencingToken", "token 2")
    refused(call(api, "GET", secret_url(attempt, "WANDB_API_KEY"), ALICE, headers=proof), 403, "Forbidden",
            "did not declare secret WANDB_API_KEY")  # fmt: skip
    refused(call(api, "GET", secret_url(attempt, "bad-name"), ALICE, headers=proof), 400, "InvalidRequest", "")
    lines = [line for line in audit_lines(service) if line["action"].startswith("secret.read")]
    assert ("alice", "secret.read") in [(line["actor"], line["action"]) for line in lines]
    assert ("bob", "secret.read.refused") in [(line["actor"], line["action"]) for line in lines]
    assert all(line["detail"].get("name", "HF_TOKEN") == "HF_TOKEN" for line in lines if line["action"] == "secret.read")
    everything = json.dumps(audit_lines(service)) + caplog.text
    for value in (HF_VALUE, OTHER_VALUE, secret):
        assert value not in everything  # neither the audit nor the service's log holds a value or the proof


def test_a_dead_attempt_reads_no_secret(api: TestClient, service: Service) -> None:
    attempt, secret = alices_attempt(service, checkpointing(tenant="tenant-a", secrets=["HF_TOKEN"]), submit_dir="/home/alice")
    with service.db.session() as session:
        attempt_event(session, attempt, AttemptState.SUCCEEDED, "test:ended", actor="test")
    proof = {"X-Metasched-Attempt-Secret": secret}
    refused(call(api, "GET", secret_url(attempt), ALICE, headers=proof), 409, "StaleFencingToken", "no longer")


def test_bob_cannot_read_alices_secret_with_his_own_attempt(api: TestClient, service: Service) -> None:
    job = service.submit(checkpointing(tenant="tenant-b", secrets=["HF_TOKEN"]),
                         principal=member("bob", 1002, ["tenant-b"])).job  # fmt: skip
    task = service.status(job.id).tasks[0].id
    attempt = place(service.db, task, [share("node1")], AttemptState.RUNNING)
    secret, digest = attempt_secret.new_secret()
    with service.db.session() as session:
        session.get(Attempt, attempt).secret_hash = digest  # type: ignore[union-attr]
    answer = call(api, "GET", secret_url(attempt), BOB, headers={"X-Metasched-Attempt-Secret": secret})
    assert answer.json() == {"name": "HF_TOKEN", "value": "bobs-own-value-not-alices"}  # his tenant's, never alice's
