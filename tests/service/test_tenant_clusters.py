"""Where a tenant may run (issue 26): ``PUT /v1/tenants/{name}`` with ``clusters``, and the submit check it feeds.

Through FastAPI's TestClient (SQLite and PostgreSQL): an admin confines a tenant, a member may
not; ``GET`` shows the list (null: any); a job whose -M list names none of the tenant's clusters
is refused at submit (422 Unschedulable, nothing stored), one without -M or naming one of them is
taken, and a job only another cluster could host is refused once the inventory is known.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path
from typing import Any

import pytest
from fastapi.testclient import TestClient
from sqlalchemy import func, select

from meta.model.errors import Unschedulable
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.service.api import Service
from meta.service.feasibility import InventoryFeasibility
from meta.service.http import create_app
from meta.service.operations import Operations
from meta.store.db import Database
from meta.store.inventory import save_inventory
from meta.store.models import Job
from tenants.identity import ADMIN
from tests.api_support import ALICE, ROOT, TestAuthenticator, principal_for
from tests.runtime.support import training

A100 = {"cpus": 4, "memory": "16G", "gpus": 2, "gpu_type": "a100"}


@pytest.fixture
def checked(database: Database) -> Service:
    """checked is the service with its submit-time feasibility check, as ``Service.open`` builds it."""
    return Service(database, feasibility=InventoryFeasibility(database))


@pytest.fixture
def api(checked: Service, tmp_path: Path) -> Iterator[TestClient]:
    """api is a TestClient over the app on an empty store."""
    app = create_app(checked, TestAuthenticator(), principal_for, secrets_root=tmp_path / "secrets")
    with TestClient(app) as client:
        yield client


def _put(api: TestClient, who: str, body: dict[str, Any]) -> Any:
    return api.put("/v1/tenants/tenant-a", headers={"Authorization": who}, json=body)


def _jobs(service: Service) -> int:
    with service.db.session() as session:
        return session.scalar(select(func.count()).select_from(Job)) or 0


def _confine(service: Service, clusters: list[str]) -> None:
    Operations(service, ADMIN).set_tenant("tenant-a", clusters=clusters)


def test_an_admin_confines_a_tenant_and_a_member_may_not(api: TestClient) -> None:
    answer = _put(api, ROOT, {"clusters": ["emu", "dev2"]})
    assert answer.status_code == 200, answer.text
    assert answer.json()["clusters"] == ["dev2", "emu"]
    refused = _put(api, ALICE, {"clusters": []})
    assert refused.status_code == 403
    shown = api.get("/v1/tenants/tenant-a", headers={"Authorization": ALICE}).json()
    assert shown["clusters"] == ["dev2", "emu"]  # a member sees where the tenant may run
    assert _put(api, ROOT, {"clusters": []}).json()["clusters"] is None  # cleared: any


@pytest.mark.parametrize("body, words", [
    ({"clusters": ["a/b"]}, "not a cluster name"),
    ({"clusters": ["any"]}, "'any' is not a cluster"),
    ({"clusters": [f"c{i}" for i in range(33)]}, "clusters"),
    ({"clusters": "dev2"}, "clusters"),
])  # fmt: skip
def test_bad_lists_are_a_400(api: TestClient, body: dict[str, Any], words: str) -> None:
    answer = _put(api, ROOT, body)
    assert answer.status_code == 400 and words in answer.text
    assert api.get("/v1/tenants", headers={"Authorization": ROOT}).json() == []


def test_a_job_naming_none_of_the_tenants_clusters_is_refused_at_submit(api: TestClient, checked: Service) -> None:
    _confine(checked, ["dev2"])
    with pytest.raises(Unschedulable) as caught:
        checked.submit(training("on-emu", "tenant-a", sbatch={"clusters": ["emu"]}))
    assert str(caught.value) == (
        "UnschedulableAndUnresolvable: tenant tenant-a may run only on the clusters dev2; the job's --clusters "
        "names emu (submit with --clusters dev2 or without it, or ask an admin to let the tenant run there)")
    spec = {"kind": "evaluation", "name": "e", "tenant": "tenant-a", "command": "true", "resources": {"gpus": 1},
            "sbatch": {"clusters": ["emu"]}}
    answer = api.post("/v1/jobs", headers={"Authorization": ROOT}, json={"spec": spec})
    assert answer.status_code == 422 and answer.json()["error"] == "Unschedulable"
    with pytest.raises(Unschedulable, match="job 1 of the batch: .*may run only on the clusters dev2"):
        checked.submit_many([training("ok", "tenant-a"), training("bad", "tenant-a", sbatch={"clusters": ["emu"]})])
    assert _jobs(checked) == 0


def test_jobs_without_m_or_naming_one_of_its_clusters_are_taken(checked: Service) -> None:
    _confine(checked, ["dev2"])
    assert checked.submit(training("any", "tenant-a")).created
    assert checked.submit(training("both", "tenant-a", sbatch={"clusters": ["emu", "dev2"]})).created
    assert checked.submit(training("elsewhere", "tenant-b", sbatch={"clusters": ["emu"]})).created  # not confined
    assert _jobs(checked) == 3


def test_a_job_only_another_cluster_could_host_is_refused_once_the_inventory_is_known(checked: Service) -> None:
    a100 = ResourceVector(cpus=64, memory=512 * 1024, gpus=8, gpu_type="a100")
    h100 = ResourceVector(cpus=64, memory=512 * 1024, gpus=8, gpu_type="h100")
    nodes = [NodeState("emu/a1", a100, ("gpu",)), NodeState("dev2/h1", h100, ("gpu",))]
    with checked.db.session() as session:
        save_inventory(session, nodes, version=1, switch_parent={})
    assert checked.submit(training("a100-anywhere", "tenant-a", resources=A100)).created
    _confine(checked, ["dev2"])
    with pytest.raises(Unschedulable, match="UnschedulableAndUnresolvable"):
        checked.submit(training("a100-on-dev2", "tenant-a", resources=A100))
    assert checked.submit(training("h100", "tenant-a", resources={**A100, "gpu_type": "h100"})).created
