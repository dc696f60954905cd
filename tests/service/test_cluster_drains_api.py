"""``POST /v1/clusters/{cluster}/drain|resume``, ``GET /v1/clusters/drains`` (issue 26): admins only, audited, checked first.

Through FastAPI's TestClient with the test authenticator, on SQLite and PostgreSQL: root and a
Slurm Operator may drain, resume and list; a member and a tenant's coordinator are refused (403,
on the refusal audit) and change nothing; a bad name or reason is a 400 before anything is stored.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient

from meta.model.errors import Forbidden
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.service.api import Service
from meta.service.http import create_app
from meta.service.operations import Operations
from meta.store import audit
from meta.store.inventory import save_inventory
from tenants.auth import Identity
from tenants.identity import Principal, member
from tests.api_support import ALICE, ROOT, TestAuthenticator, principal_for

DAVE = "TEST uid=1004"  # coordinator of tenant-a
OSCAR = "TEST uid=1005"  # Slurm AdminLevel=Operator


def _principal_for(identity: Identity, tenant: str | None) -> Principal:
    """_principal_for is the shared test resolver plus a coordinator (dave) and an Operator (oscar)."""
    if identity.uid == 1004:
        return member("dave", 1004, ["tenant-a"], coordinates=["tenant-a"], tenant=tenant)
    if identity.uid == 1005:
        return member("oscar", 1005, ["research"], admin=True, tenant=tenant)
    return principal_for(identity, tenant)


@pytest.fixture
def api(service: Service, tmp_path: Path) -> Iterator[TestClient]:
    """api is a TestClient over the app on an empty store (SQLite and PostgreSQL)."""
    app = create_app(service, TestAuthenticator(), _principal_for, secrets_root=tmp_path / "secrets")
    with TestClient(app) as client:
        yield client


def _call(api: TestClient, method: str, url: str, who: str, body: dict[str, Any] | None = None) -> Any:
    return api.request(method, url, headers={"Authorization": who}, json=body)


def _actions(service: Service) -> list[str]:
    with service.db.session() as session:
        return [line.action for line in reversed(audit.read(session, limit=1000))]


@pytest.mark.parametrize("who", [ROOT, OSCAR])
def test_an_admin_drains_lists_and_resumes_on_the_record(api: TestClient, service: Service, who: str) -> None:
    drained = _call(api, "POST", "/v1/clusters/dev2/drain", who, {"reason": "switch firmware"})
    assert drained.status_code == 200, drained.text
    found = drained.json()
    assert (found["cluster"], found["reason"], found["drained"], found["new"]) == ("dev2", "switch firmware", True, True)
    assert found["known"] is None  # no daemon stored an inventory yet
    again = _call(api, "POST", "/v1/clusters/dev2/drain", who).json()  # idempotent: the first drain stays
    assert not again["new"] and again["drained_at"] == found["drained_at"] and again["reason"] == "switch firmware"
    listed = _call(api, "GET", "/v1/clusters/drains", who)
    assert listed.status_code == 200 and [d["cluster"] for d in listed.json()] == ["dev2"]
    assert listed.json()[0]["drained_by"] == found["drained_by"] == ("root" if who == ROOT else "oscar")
    resumed = _call(api, "POST", "/v1/clusters/dev2/resume", who).json()
    assert resumed["was_drained"] and resumed["ended"]["reason"] == "switch firmware"
    assert _call(api, "GET", "/v1/clusters/drains", who).json() == []
    assert _actions(service) == ["cluster.drain", "cluster.drain", "cluster.resume"]


@pytest.mark.parametrize("who", [ALICE, DAVE])
def test_members_and_coordinators_are_refused_and_change_nothing(api: TestClient, service: Service, who: str) -> None:
    assert _call(api, "POST", "/v1/clusters/emu/drain", ROOT, {"reason": "kept"}).status_code == 200
    for method, url in (("POST", "/v1/clusters/dev2/drain"), ("POST", "/v1/clusters/emu/resume"),
                        ("GET", "/v1/clusters/drains")):
        answer = _call(api, method, url, who, {"reason": "mine"} if url.endswith("drain") else None)
        assert answer.status_code == 403, (url, answer.text)
        assert answer.json()["error"] == "Forbidden" and "only an admin" in answer.json()["message"]
    assert [d["cluster"] for d in _call(api, "GET", "/v1/clusters/drains", ROOT).json()] == ["emu"]
    actions = _actions(service)
    assert actions.count("cluster.drain") == 1 and "cluster.resume" not in actions
    assert "request.refused" in actions


@pytest.mark.parametrize(
    ("url", "body", "words"),
    [
        ("/v1/clusters/dev%202/drain", None, "not a cluster name"),
        ("/v1/clusters/" + "x" * 21 + "/drain", None, "not a cluster name"),
        ("/v1/clusters/dev%2F2/drain", None, ""),  # '/' never reaches the name's check: no such route
        ("/v1/clusters/dev2/drain", {"reason": "x" * 201}, "at most 200 printable"),
        ("/v1/clusters/dev2/drain", {"reason": "two\nlines"}, "at most 200 printable"),
        ("/v1/clusters/dev2/drain", {"reason": 7}, "reason"),
        ("/v1/clusters/dev2/drain", {"why": "x"}, "why"),
        ("/v1/clusters/..bad/resume", None, "not a cluster name"),
    ],
)
def test_a_bad_name_or_reason_is_refused_before_anything_is_stored(
    api: TestClient, service: Service, url: str, body: dict[str, Any] | None, words: str
) -> None:
    answer = _call(api, "POST", url, ROOT, body)
    assert answer.status_code in (400, 404), answer.text
    assert words in answer.json()["message"]
    assert _call(api, "GET", "/v1/clusters/drains", ROOT).json() == []
    assert _actions(service) == []


def test_known_says_whether_the_stored_inventory_has_the_cluster(api: TestClient, service: Service) -> None:
    capacity = ResourceVector(cpus=64, memory=512 * 1024, gpus=8, gpu_type="a100")
    nodes = [NodeState(f"{cluster}/a100n1", capacity, ("gpu",)) for cluster in ("dev1", "dev2")]
    with service.db.session() as session:
        save_inventory(session, nodes, version=1, switch_parent={})
    assert _call(api, "POST", "/v1/clusters/dev2/drain", ROOT).json()["known"] is True
    assert _call(api, "POST", "/v1/clusters/dev3/drain", ROOT).json()["known"] is False  # drained all the same


def test_the_operations_refuse_a_scoped_member_but_not_an_admin_acting_for_a_tenant(service: Service) -> None:
    coordinator = Operations(service, member("dave", 1004, ["tenant-a"], coordinates=["tenant-a"], tenant="tenant-a"))
    with pytest.raises(Forbidden):
        coordinator.drain_cluster("dev2")
    operator = Operations(service, member("oscar", 1005, ["research"], admin=True, tenant="research"))
    assert operator.drain_cluster("dev2", "firmware")["new"] is True
    assert [d["reason"] for d in operator.cluster_drains()] == ["firmware"]
