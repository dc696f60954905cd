"""The API service (meta/service/http.py) through FastAPI's TestClient, with the test-only authenticator.

Every route, the error mapping of docs/identity.md §2, the body and target bounds, OpenAPI, and
tenant isolation: tenant-A's caller gets 404 for tenant-B's job, and learns nothing about it.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from checkpoint.manifest_files import build_manifest
from meta.service.api import Service
from meta.service.http import create_app
from meta.store import audit
from tenants.associations import AccountingUnavailable
from tenants.munge import MungeUnavailable
from tests.api_support import (
    ALICE,
    BOB,
    ROOT,
    TestAuthenticator,
    alices_attempt,
    payload_digest,
    principal_for,
)
from tests.conftest import sqlite_database
from tests.runtime.support import checkpointing, inference

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRAIN = (EXAMPLES / "train.yaml").read_text()  # tenant-a
INFER = (EXAMPLES / "infer.yaml").read_text()  # tenant-b


@pytest.fixture
def api(service: Service, tmp_path: Path) -> Iterator[TestClient]:
    """api is a TestClient over the app on an empty store (SQLite and PostgreSQL)."""
    app = create_app(service, TestAuthenticator(), principal_for, secrets_root=tmp_path / "secrets")
    with TestClient(app) as client:
        yield client


@pytest.fixture
def sqlite_api(tmp_path: Path) -> Iterator[TestClient]:
    """sqlite_api is the app on a SQLite store only: for checks that happen before any store access."""
    service = Service(sqlite_database(tmp_path / "auth.sqlite"))
    with TestClient(create_app(service, TestAuthenticator(), principal_for)) as client:
        yield client
    service.db.dispose()


def call(api: TestClient, method: str, url: str, who: str | None = ROOT, **kwargs: Any) -> Any:
    """call sends one request as ``who`` and returns the response (``content`` is sent as JSON)."""
    headers = {"Authorization": who} if who else {}
    if "content" in kwargs:
        headers["Content-Type"] = "application/json"
    return api.request(method, url, headers=headers, **kwargs)


def ok(response: Any, status: int = 200) -> Any:
    assert response.status_code == status, response.text
    return response.json()


def error(response: Any, status: int, kind: str) -> str:
    """error checks an error answer's status and shape and returns its message."""
    assert response.status_code == status, response.text
    body = response.json()
    assert body["error"] == kind and isinstance(body["message"], str) and "\n" not in body["message"], body
    return body["message"]


def submit_text(api: TestClient, text: str, who: str = ROOT, **fields: Any) -> dict[str, Any]:
    return ok(call(api, "POST", "/v1/jobs", who, json={"spec_text": text, **fields}), 201)


# --- the service itself ---------------------------------------------------------------------

ROUTES = [
    ("GET", "/v1/whoami"),
    ("POST", "/v1/jobs"),
    ("POST", "/v1/jobs/batch"),
    ("GET", "/v1/jobs"),
    ("GET", "/v1/jobs/{ref}"),
    ("GET", "/v1/jobs/{ref}/explain"),
    ("GET", "/v1/jobs/{ref}/explain/history"),
    ("GET", "/v1/jobs/{ref}/outputs"),
    ("GET", "/v1/jobs/{ref}/checkpoints"),
    ("POST", "/v1/jobs/{ref}/cancel"),
    ("POST", "/v1/jobs/{ref}/retry"),
    ("GET", "/v1/tenants"),
    ("GET", "/v1/tenants/{name}"),
    ("PUT", "/v1/tenants/{name}"),
    ("GET", "/v1/tenants/{tenant}/secrets"),
    ("PUT", "/v1/tenants/{tenant}/secrets/{name}"),
    ("DELETE", "/v1/tenants/{tenant}/secrets/{name}"),
    ("GET", "/v1/audit"),
    ("POST", "/v1/attempts/{attempt_id}/commit"),
    ("POST", "/v1/attempts/{attempt_id}/checkpoints"),
]


def test_healthz_and_openapi_need_no_credential(api: TestClient) -> None:
    assert ok(call(api, "GET", "/healthz", None)) == {"status": "ok"}
    schema = ok(call(api, "GET", "/openapi.json", None))
    offered = {(method.upper(), path) for path, item in schema["paths"].items() for method in item}
    assert set(ROUTES) | {("GET", "/healthz")} <= offered
    assert schema["info"]["title"] == "metasched"


@pytest.mark.parametrize(("method", "path"), ROUTES)
@pytest.mark.parametrize("header", [None, "", "Basic cm9vdDpyb290", "TEST uid=root"])
def test_every_route_needs_a_credential(sqlite_api: TestClient, method: str, path: str, header: str | None) -> None:
    url = path.format(ref="j00000000", name="x", tenant="tenant-a", attempt_id="a")
    message = error(call(sqlite_api, method, url, header, json={}), 401, "Unauthenticated")
    assert message


def test_an_unknown_route_is_404_in_the_api_shape(api: TestClient) -> None:
    error(call(api, "GET", "/v1/nothing"), 404, "NotFound")
    error(call(api, "DELETE", "/v1/jobs"), 405, "MethodNotAllowed")


def test_whoami(api: TestClient) -> None:
    me = ok(call(api, "GET", "/v1/whoami", ALICE))
    assert (me["user"], me["uid"], me["gid"], me["admin"], me["accounts"]) == ("alice", 1001, 1001, False, ["tenant-a"])
    root = ok(call(api, "GET", "/v1/whoami", ROOT))
    assert (root["user"], root["uid"], root["admin"]) == ("root", 0, True)


def test_the_credential_covers_the_target_and_body_as_sent(service: Service, tmp_path: Path) -> None:
    authenticator = TestAuthenticator()
    with TestClient(create_app(service, authenticator, principal_for)) as api:
        url = "/v1/jobs?tenant=tenant-a&state=pending&limit=5"
        bound = f"MUNGE uid=0;bind={payload_digest('GET', url, b'')}"
        assert ok(call(api, "GET", url, bound)) == []
        error(call(api, "GET", url.replace("limit=5", "limit=6"), bound), 401, "Unauthenticated")
        body = json.dumps({"spec_text": TRAIN}).encode()
        bound = f"MUNGE uid=0;bind={payload_digest('POST', '/v1/jobs', body)}"
        ok(call(api, "POST", "/v1/jobs", bound, content=body), 201)
        other = body.replace(b"llama", b"llamb")
        error(call(api, "POST", "/v1/jobs", bound, content=other), 401, "Unauthenticated")
    assert authenticator.seen[0] == ("GET", url, b"")


# --- jobs -----------------------------------------------------------------------------------


def test_submit_text_then_read_it_back(api: TestClient) -> None:
    job = submit_text(api, TRAIN, source="train.yaml")
    assert (job["tenant"], job["kind"], job["state"], job["created"]) == ("tenant-a", "training", "pending", True)
    assert [j["short_id"] for j in ok(call(api, "GET", "/v1/jobs"))] == [job["short_id"]]
    status = ok(call(api, "GET", f"/v1/jobs/{job['short_id']}"))
    assert status["id"] == job["id"] and status["spec"]["name"] == "llama-7b-finetune"
    assert ok(call(api, "GET", f"/v1/jobs/{job['id']}"))["short_id"] == job["short_id"]
    why = ok(call(api, "GET", f"/v1/jobs/{job['short_id']}/explain"))
    assert why["job"] == job["short_id"] and why["tasks"][0]["state"] == "pending"
    assert ok(call(api, "GET", f"/v1/jobs/{job['short_id']}/outputs"))["partitions"][0]["manifest"] is None
    points = ok(call(api, "GET", f"/v1/jobs/{job['short_id']}/checkpoints", params={"node_mtbf_s": 3600}))
    assert points["checkpoints"] == [] and points["recommended_interval_s"] > 0 and points["workers"] >= 1


def test_submit_a_parsed_spec(api: TestClient) -> None:
    spec = {"kind": "evaluation", "name": "e", "tenant": "tenant-a", "command": "true", "resources": {"cpus": 1}}
    job = ok(call(api, "POST", "/v1/jobs", ALICE, json={"spec": spec, "submit_dir": "/home/alice"}), 201)
    assert (job["name"], job["tenant"], job["kind"]) == ("e", "tenant-a", "evaluation")


def test_an_idempotency_key_returns_the_same_job_and_refuses_another_spec(api: TestClient) -> None:
    first = submit_text(api, TRAIN, key="k-1")
    again = ok(call(api, "POST", "/v1/jobs", json={"spec_text": TRAIN, "key": "k-1"}), 200)
    assert (again["id"], again["created"]) == (first["id"], False)
    changed = TRAIN.replace("llama-7b-finetune", "other-name")
    assert "idempotency key" in error(call(api, "POST", "/v1/jobs", json={"spec_text": changed, "key": "k-1"}), 409, "Conflict")


@pytest.mark.parametrize(
    ("body", "kind", "words"),
    [
        ({"spec_text": "kind: training\nname: x\n"}, "SpecError", "invalid job spec: "),
        ({"spec_text": "a: *b\n"}, "SpecError", "aliases"),
        ({"spec_text": "kind: training\x00\n"}, "SpecError", "NUL"),
        ({"spec_text": "kind: \ud800\n"}, "SpecError", "UTF-8"),
        ({"spec": {"kind": "nope"}}, "SpecError", "kind:"),
        ({}, "InvalidRequest", "exactly one of spec_text"),
        ({"spec_text": TRAIN, "spec": {}}, "InvalidRequest", "exactly one of spec_text"),
        ({"spec_text": TRAIN, "surprise": 1}, "InvalidRequest", "surprise"),
        ({"spec_text": 5}, "InvalidRequest", "spec_text"),
        ({"spec_text": TRAIN, "key": ""}, "InvalidRequest", "idempotency key"),
    ],
    ids=["missing-fields", "alias", "nul", "surrogate", "bad-kind", "neither", "both", "extra", "not-text", "empty-key"],
)
def test_a_bad_submit_is_400_with_one_line(api: TestClient, body: dict, kind: str, words: str) -> None:
    response = call(api, "POST", "/v1/jobs", content=json.dumps(body))
    assert words in error(response, 400, kind)
    assert ok(call(api, "GET", "/v1/jobs")) == []  # nothing was stored


def test_a_spec_error_lists_its_problems(api: TestClient) -> None:
    body = call(api, "POST", "/v1/jobs", json={"spec_text": "kind: training\n"}).json()
    assert body["problems"] and all(": " in problem for problem in body["problems"])


def test_an_unschedulable_spec_is_422(tmp_path: Path, service: Service) -> None:
    picky = Service(service.db, feasibility=lambda spec: "no node of the cluster has 8 x a100")
    with TestClient(create_app(picky, TestAuthenticator(), principal_for)) as api:
        assert "no node" in error(call(api, "POST", "/v1/jobs", json={"spec_text": TRAIN}), 422, "Unschedulable")


def test_list_filters_and_bounds(api: TestClient) -> None:
    train = submit_text(api, TRAIN)
    infer = submit_text(api, INFER)
    assert [j["short_id"] for j in ok(call(api, "GET", "/v1/jobs", params={"tenant": "tenant-b"}))] == [infer["short_id"]]
    assert len(ok(call(api, "GET", "/v1/jobs", params={"state": "pending", "limit": 1}))) == 1
    assert ok(call(api, "GET", "/v1/jobs", params={"state": "running"})) == []
    assert {j["short_id"] for j in ok(call(api, "GET", "/v1/jobs"))} == {train["short_id"], infer["short_id"]}
    assert "state" in error(call(api, "GET", "/v1/jobs", params={"state": "sleeping"}), 400, "InvalidRequest")
    for limit in (0, 100_001, "many"):
        error(call(api, "GET", "/v1/jobs", params={"limit": limit}), 400, "InvalidRequest")


def test_list_pages_on_with_a_keyset_cursor(api: TestClient) -> None:
    jobs = [submit_text(api, INFER.replace("name: ", f"name: p{i}-", 1))["short_id"] for i in range(5)]
    newest_first = jobs[::-1]
    first = ok(call(api, "GET", "/v1/jobs", params={"limit": 2}))
    assert [j["short_id"] for j in first] == newest_first[:2]
    second = ok(call(api, "GET", "/v1/jobs", params={"limit": 2, "after": first[-1]["short_id"]}))
    assert [j["short_id"] for j in second] == newest_first[2:4]
    last = ok(call(api, "GET", "/v1/jobs", params={"limit": 2, "after": second[-1]["short_id"]}))
    assert [j["short_id"] for j in last] == newest_first[4:]
    assert last[0]["tasks"] == {"pending": 4} and last[0]["state"] == "pending"
    error(call(api, "GET", "/v1/jobs", params={"after": "nosuchjob"}), 404, "NotFound")
    # another tenant's job is no cursor for alice: its position would tell that it exists
    error(call(api, "GET", "/v1/jobs", params={"after": jobs[0]}, who=ALICE), 404, "NotFound")


def test_a_batch_of_job_files_is_one_transaction(api: TestClient) -> None:
    batch = {"jobs": [{"spec_text": TRAIN, "source": "train.yaml"}, {"spec_text": INFER, "source": "infer.yaml"}],
             "key": "nightly"}  # fmt: skip
    first = ok(call(api, "POST", "/v1/jobs/batch", json=batch), 201)["jobs"]
    assert [(j["name"], j["tenant"], j["created"]) for j in first] == [
        ("llama-7b-finetune", "tenant-a", True), ("embed-corpus", "tenant-b", True)]  # fmt: skip
    again = ok(call(api, "POST", "/v1/jobs/batch", json=batch), 200)["jobs"]
    assert [j["id"] for j in again] == [j["id"] for j in first] and not any(j["created"] for j in again)
    # alice may submit to tenant-a only: her batch naming tenant-b stores nothing at all
    refused = call(api, "POST", "/v1/jobs/batch", ALICE, json={"jobs": batch["jobs"]})
    assert refused.status_code == 400 and "Invalid account" in refused.json()["message"]
    bad = {"jobs": [{"spec_text": TRAIN, "source": "ok.yaml"}, {"spec_text": "kind: training\n", "source": "bad.yaml"}]}
    assert "bad.yaml" in error(call(api, "POST", "/v1/jobs/batch", json=bad), 400, "SpecError")
    assert len(ok(call(api, "GET", "/v1/jobs"))) == 2
    error(call(api, "POST", "/v1/jobs/batch", json={"jobs": []}), 400, "InvalidRequest")


def test_cancel_and_retry(api: TestClient) -> None:
    job = submit_text(api, INFER)
    ref = job["short_id"]
    assert "nothing to retry" in error(call(api, "POST", f"/v1/jobs/{ref}/retry"), 400, "InvalidRequest")
    assert ok(call(api, "POST", f"/v1/jobs/{ref}/cancel"))["state"] == "cancelled"
    assert ok(call(api, "POST", f"/v1/jobs/{ref}/cancel"))["state"] == "cancelled"  # idempotent
    (task,) = ok(call(api, "POST", f"/v1/jobs/{ref}/retry", json={"task": 2}))
    assert (task["index"], task["state"]) == (2, "pending")
    assert len(ok(call(api, "POST", f"/v1/jobs/{ref}/retry"))) == 3  # the other three; no body = all
    error(call(api, "POST", f"/v1/jobs/{ref}/retry", json={"task": 99}), 404, "NotFound")
    error(call(api, "POST", f"/v1/jobs/{ref}/retry", json={"task": -1}), 400, "InvalidRequest")


@pytest.mark.parametrize("ref", ["jzzzzzzzz", "00000000-0000-4000-8000-000000000000", "%2e%2e", "x" * 1025])
def test_an_unknown_job_is_404(api: TestClient, ref: str) -> None:
    for suffix in ("", "/explain", "/outputs", "/checkpoints"):
        response = call(api, "GET", f"/v1/jobs/{ref}{suffix}")
        assert response.status_code in (400, 404), response.text
        assert response.json()["error"] in ("NotFound", "InvalidRequest")


def test_a_tenant_never_sees_another_tenants_job(api: TestClient) -> None:
    theirs = submit_text(api, INFER)  # tenant-b's, submitted by root
    for ref in (theirs["short_id"], theirs["id"]):
        for method, suffix in (("GET", ""), ("GET", "/explain"), ("GET", "/outputs"), ("GET", "/checkpoints"),
                               ("POST", "/cancel"), ("POST", "/retry")):
            response = call(api, method, f"/v1/jobs/{ref}{suffix}", ALICE)
            message = error(response, 404, "NotFound")
            assert "tenant-b" not in response.text and "embed-corpus" not in response.text, message
    assert ok(call(api, "GET", "/v1/jobs", ALICE)) == []
    assert ok(call(api, "GET", "/v1/jobs", ALICE, params={"tenant": "tenant-b"})) == []
    assert ok(call(api, "GET", f"/v1/jobs/{theirs['short_id']}", BOB))["tenant"] == "tenant-b"
    assert ok(call(api, "GET", f"/v1/jobs/{theirs['short_id']}"))["state"] == "pending"  # untouched


def test_a_member_submits_only_to_its_own_tenant(api: TestClient) -> None:
    response = call(api, "POST", "/v1/jobs", ALICE, json={"spec_text": INFER})  # the file says tenant-b
    assert response.status_code in (400, 403, 404), response.text
    assert ok(call(api, "GET", "/v1/jobs")) == []
    mine = submit_text(api, TRAIN, who=ALICE)
    assert ok(call(api, "GET", "/v1/jobs", ALICE))[0]["id"] == mine["id"]


def test_acting_for_a_tenant_that_is_not_yours_is_refused_in_sbatch_words(api: TestClient) -> None:
    message = error(call(api, "GET", "/v1/jobs", ALICE, params={"as_tenant": "tenant-b"}), 400, "InvalidAccount")
    assert "Invalid account or account/partition combination specified" in message
    body = {"spec_text": INFER, "tenant": "tenant-b"}
    error(call(api, "POST", "/v1/jobs", ALICE, json=body), 400, "InvalidAccount")
    assert ok(call(api, "GET", "/v1/jobs", ALICE, params={"as_tenant": "tenant-a"})) == []


# --- tenants, secrets, audit ----------------------------------------------------------------


def test_tenants(api: TestClient) -> None:
    view = ok(call(api, "PUT", "/v1/tenants/tenant-a", json={"guaranteed": ["a100=4", "*=2"]}))
    assert (view["name"], view["guaranteed"]) == ("tenant-a", {"a100": 4, "*": 2})
    ok(call(api, "PUT", "/v1/tenants/tenant-b", json={}))
    assert [t["name"] for t in ok(call(api, "GET", "/v1/tenants"))] == ["tenant-a", "tenant-b"]
    assert [t["name"] for t in ok(call(api, "GET", "/v1/tenants", ALICE))] == ["tenant-a"]
    assert ok(call(api, "GET", "/v1/tenants/tenant-a", ALICE))["guaranteed"] == {"a100": 4, "*": 2}
    error(call(api, "GET", "/v1/tenants/tenant-b", ALICE), 404, "NotFound")
    error(call(api, "PUT", "/v1/tenants/tenant-a", ALICE, json={"guaranteed": ["a100=9"]}), 403, "Forbidden")
    error(call(api, "PUT", "/v1/tenants/tenant-a", json={"guaranteed": ["a100=lots"]}), 400, "InvalidRequest")
    error(call(api, "PUT", "/v1/tenants/tenant-a", json={"guaranteed": ["x=1"] * 65}), 400, "InvalidRequest")
    error(call(api, "PUT", "/v1/tenants/bad%20name", json={}), 400, "InvalidRequest")
    # weights and GPU limits are Slurm's (docs/identity.md §6): refused with the sacctmgr command
    message = error(call(api, "PUT", "/v1/tenants/tenant-a", json={"weight": 2}), 400, "SlurmOwnedSetting")
    assert "sacctmgr modify account where name=tenant-a" in message


def test_secrets_are_set_listed_and_deleted_by_name_only(api: TestClient, service: Service, tmp_path: Path) -> None:
    value = "s3cr3t-value-123"
    assert ok(call(api, "PUT", "/v1/tenants/tenant-a/secrets/HF_TOKEN", json={"value": value}))["set"] is True
    assert (tmp_path / "secrets" / "tenant-a" / "HF_TOKEN").read_text() == value
    assert ok(call(api, "GET", "/v1/tenants/tenant-a/secrets", ALICE)) == ["HF_TOKEN"]
    error(call(api, "GET", "/v1/tenants/tenant-a/secrets", BOB), 403, "Forbidden")
    error(call(api, "PUT", "/v1/tenants/tenant-a/secrets/X", BOB, json={"value": "v"}), 403, "Forbidden")
    error(call(api, "PUT", "/v1/tenants/tenant-a/secrets/METASCHED_X", json={"value": "v"}), 400, "InvalidRequest")
    error(call(api, "PUT", "/v1/tenants/tenant-a/secrets/X", json={"value": ""}), 400, "InvalidRequest")
    assert ok(call(api, "DELETE", "/v1/tenants/tenant-a/secrets/HF_TOKEN"))["deleted"] is True
    error(call(api, "DELETE", "/v1/tenants/tenant-a/secrets/HF_TOKEN"), 404, "NotFound")
    lines = ok(call(api, "GET", "/v1/audit"))
    # bob's two refusals are audited too (S12); the secret's own rows are the set and the delete
    assert [line["action"] for line in lines if line["action"].startswith("secret.")] == ["secret.delete", "secret.set"]
    assert [line["actor"] for line in lines if line["action"] == "request.refused"] == ["bob", "bob"]
    assert value not in json.dumps(lines)
    with service.db.session() as session:
        assert value not in json.dumps([e.to_dict() for e in audit.read(session)])


def test_audit_is_scoped_and_bounded(api: TestClient) -> None:
    a = submit_text(api, TRAIN)
    b = submit_text(api, INFER)
    for job in (a, b):
        ok(call(api, "POST", f"/v1/jobs/{job['short_id']}/cancel"))
    assert {line["subject"] for line in ok(call(api, "GET", "/v1/audit"))} == {a["short_id"], b["short_id"]}
    assert [line["subject"] for line in ok(call(api, "GET", "/v1/audit", ALICE))] == [a["short_id"]]
    assert len(ok(call(api, "GET", "/v1/audit", params={"limit": 1}))) == 1
    assert ok(call(api, "GET", "/v1/audit", params={"since": "2999-01-01T00:00:00Z"})) == []
    error(call(api, "GET", "/v1/audit", params={"since": "yesterday-ish"}), 400, "InvalidRequest")


# --- from inside a job ----------------------------------------------------------------------


def test_a_checkpoint_report_is_fenced(api: TestClient, service: Service) -> None:
    attempt, secret = alices_attempt(service, checkpointing(tenant="tenant-a"))
    url = f"/v1/attempts/{attempt}/checkpoints"
    body = {"token": 1, "step": 10, "path": "/ck/10", "size_bytes": 5, "secret": secret}
    view = ok(call(api, "POST", url, ALICE, json=body))
    assert (view["attempt_id"], view["step"], view["size_bytes"]) == (attempt, 10, 5)
    error(call(api, "POST", url, ALICE, json={**body, "token": 7, "step": 11}), 409, "StaleFencingToken")
    error(call(api, "POST", url, BOB, json={**body, "step": 12}), 404, "NotFound")
    error(call(api, "POST", url, ALICE, json={**body, "step": -1}), 400, "InvalidRequest")
    error(call(api, "POST", "/v1/attempts/nope/checkpoints", json={"token": 1, "step": 1, "path": "/c"}), 404, "NotFound")
    job = ok(call(api, "GET", "/v1/jobs", ALICE))[0]["short_id"]
    assert [c["step"] for c in ok(call(api, "GET", f"/v1/jobs/{job}/checkpoints", ALICE))["checkpoints"]] == [10]


def test_an_output_commit_is_fenced_once_and_checked(api: TestClient, service: Service, tmp_path: Path) -> None:
    attempt, secret = alices_attempt(service, inference(str(tmp_path / "out"), tenant="tenant-a"))
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "part-0.jsonl").write_text("{}\n")
    manifest = build_manifest(staging)
    url = f"/v1/attempts/{attempt}/commit"
    body = {"token": 1, "manifest": manifest, "secret": secret}
    error(call(api, "POST", url, BOB, json=body), 404, "NotFound")
    bad = {**manifest, "files": [{**manifest["files"][0], "path": "../escape"}]}
    error(call(api, "POST", url, ALICE, json={**body, "manifest": bad}), 400, "InvalidRequest")
    wrong_total = {**manifest, "bytes": manifest["bytes"] + 1}
    error(call(api, "POST", url, ALICE, json={**body, "manifest": wrong_total}), 400, "InvalidRequest")
    error(call(api, "POST", url, ALICE, json={**body, "token": 2}), 409, "StaleFencingToken")
    done = ok(call(api, "POST", url, ALICE, json=body))
    assert (done["attempt_id"], done["files"]) == (attempt, 1)
    ok(call(api, "POST", url, ALICE, json=body))  # the same commit again
    other = {**manifest, "files": [], "bytes": 0}
    error(call(api, "POST", url, ALICE, json={**body, "manifest": other}), 409, "Conflict")
    job = ok(call(api, "GET", "/v1/jobs", ALICE))[0]["short_id"]
    parts = ok(call(api, "GET", f"/v1/jobs/{job}/outputs", ALICE))["partitions"]
    assert parts[0]["attempt"] == attempt and parts[0]["manifest"] == manifest


# --- bounds ---------------------------------------------------------------------------------


def test_a_body_over_the_bound_is_refused_before_it_is_read(service: Service) -> None:
    authenticator = TestAuthenticator()
    with TestClient(create_app(service, authenticator, principal_for, max_body_bytes=1000)) as api:
        big = json.dumps({"spec_text": "x" * 2000})
        error(call(api, "POST", "/v1/jobs", content=big), 413, "PayloadTooLarge")

        def chunks() -> Iterator[bytes]:  # no Content-Length: the guard counts while reading
            for _ in range(10):
                yield b"x" * 400

        error(call(api, "POST", "/v1/jobs", content=chunks()), 413, "PayloadTooLarge")
        assert authenticator.seen == []  # refused before anyone was asked who sent it
        small = call(api, "POST", "/v1/jobs", content=json.dumps({"spec_text": "k: v"}))
        error(small, 400, "SpecError")  # within the bound: read, authenticated and judged


def test_a_bad_content_length_or_a_huge_target_is_refused(api: TestClient) -> None:
    error(call(api, "GET", "/v1/jobs?tenant=" + "a" * 9000), 414, "InvalidRequest")
    error(call(api, "GET", "/v1/jobs", params={"tenant": "t" * 1025}), 400, "InvalidRequest")
    response = api.post("/v1/jobs", content=b"{}", headers={"Authorization": ROOT, "Content-Length": "nope"})
    assert response.status_code == 400


def test_deeply_nested_json_is_a_400_not_a_crash(api: TestClient) -> None:
    body = b'{"spec": ' + b"[" * 200_000 + b"]" * 200_000 + b"}"
    response = api.post("/v1/jobs", content=body, headers={"Authorization": ROOT, "Content-Type": "application/json"})
    assert response.status_code == 400 and response.json()["error"] == "InvalidRequest"


def test_the_services_own_munged_or_accounting_down_is_503(service: Service) -> None:
    class MungedDown:
        def authenticate(self, *_: Any) -> Any:
            raise MungeUnavailable("the local munged cannot be reached")

    with TestClient(create_app(service, MungedDown(), principal_for)) as api:
        assert "munged" in error(call(api, "GET", "/v1/jobs"), 503, "MungeUnavailable")

    def accounting_down(*_: Any) -> Any:
        raise AccountingUnavailable("Slurm accounting cannot be read (user alice): slurmdbd down")

    with TestClient(create_app(service, TestAuthenticator(), accounting_down)) as api:
        assert "slurmdbd" in error(call(api, "GET", "/v1/jobs", ALICE), 503, "AccountingUnavailable")


def test_a_request_without_any_credential_is_refused_before_its_body_is_read(service: Service) -> None:
    authenticator = TestAuthenticator()
    with TestClient(create_app(service, authenticator, principal_for, max_body_bytes=10)) as api:
        response = call(api, "POST", "/v1/jobs", None, content=json.dumps({"spec_text": "x" * 100}))
        assert "no credential" in error(response, 401, "Unauthenticated")  # not 413: never read
