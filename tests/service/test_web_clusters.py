"""The web view's Slurm clusters page (issue 26): one row per cluster from the store, through FastAPI's TestClient.

The stored inventory names nodes of clusters a and b; live attempts hold GPUs on both; an admin
drained b. Every signed-in user sees each cluster's nodes by state, GPUs total and free by type,
live attempts, and that b is drained with its reason; only an admin sees who drained it and
since when (as ``metasched cluster list``). A single-cluster site's page points to the cluster
map. SQLite and PostgreSQL.
"""

from __future__ import annotations

from collections.abc import Iterator
from pathlib import Path

import pytest
from fastapi.testclient import TestClient

from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.service.http import create_app
from meta.service.web.auth import WebSettings
from meta.service.web.data import ClusterTable, cluster_table
from meta.service.web.pages import clusters_body
from meta.store import cluster_drains
from meta.store.inventory import save_inventory
from tests.api_support import ALICE, ROOT, TestAuthenticator, principal_for
from tests.runtime.support import place, share
from tests.service.test_web import sign_in, submit


@pytest.fixture
def client(service: Service, tmp_path: Path) -> Iterator[TestClient]:
    """client is a browser-like TestClient (it keeps cookies) over the app with the web view on."""
    settings = WebSettings(key=b"k" * 32, base_url="http://127.0.0.1:9465", log_dir="/var/log/ms")
    app = create_app(service, TestAuthenticator(), principal_for, secrets_root=tmp_path / "secrets", web=settings)
    with TestClient(app, base_url="http://127.0.0.1:9465") as test_client:
        yield test_client


def _node(name: str, gpu_type: str = "a100", **health: bool) -> NodeState:
    return NodeState(name, ResourceVector(cpus=64, memory=512000, gpus=8, gpu_type=gpu_type), ("gpu",), "leaf1",
                     **health)  # fmt: skip


def _store_site(service: Service) -> None:
    nodes = [_node("a/n1"), _node("a/n2"), _node("a/n3", healthy=False), _node("b/n1", "h100"),
             _node("b/n2", "h100", drained=True)]  # fmt: skip
    with service.db.session() as session:
        save_inventory(session, nodes, 1, {"leaf1": "spine"})
        cluster_drains.drain(session, "b", "switch <firmware>", actor="root")
    alices = submit(service, "train.yaml", "alice", 1001, "tenant-a")
    place(service.db, service.status(alices).tasks[0].id, [share("a/n1", gpus=8), share("a/n2", gpus=2)],
          AttemptState.RUNNING)  # fmt: skip
    bobs = submit(service, "infer.yaml", "bob", 1002, "tenant-b")
    place(service.db, service.status(bobs).tasks[0].id, [share("b/n1", gpus=3, gpu_type="h100")], AttemptState.RUNNING)


def test_each_cluster_is_one_row_read_from_the_store(service: Service) -> None:
    _store_site(service)
    with service.db.session() as session:
        found = cluster_table(session)
    a, b = found.rows
    assert (a.cluster, a.nodes, a.total_gpus, a.free_gpus, a.running_attempts, a.drained) == (
        "a", {"schedulable": 2, "drained": 0, "down": 1}, {"a100": 16}, {"a100": 6}, 1, False)
    # b's nodes are in Slurm's states: the admin's drain is the row's, not its nodes'
    assert (b.nodes, b.total_gpus, b.free_gpus, b.running_attempts, b.drained) == (
        {"schedulable": 1, "drained": 1, "down": 0}, {"h100": 8}, {"h100": 5}, 1, True)
    assert found.drains["b"].reason == "switch <firmware>" and found.inventory_at is not None


def test_every_user_sees_the_clusters_and_only_an_admin_who_drained_one(client: TestClient, service: Service) -> None:
    _store_site(service)
    sign_in(client, ALICE)
    answer = client.get("/web/clusters")
    assert answer.status_code == 200, answer.text
    page = answer.text
    assert 'href="/web/clusters" class="on"' in page and "Slurm clusters" in page
    assert "2 schedulable, 1 down" in page and "a100: 16" in page and "a100: 6" in page
    assert "1 schedulable, 1 drained" in page and "h100: 8" in page and "h100: 5" in page
    assert "switch &lt;firmware&gt;" in page and "<firmware>" not in page  # escaped
    assert "by root" not in page and "metasched_slurm_cluster_up" in page
    client.cookies.clear()
    sign_in(client, ROOT)
    assert "drained</span> by root since " in client.get("/web/clusters").text


def test_a_single_cluster_site_points_to_the_cluster_map(client: TestClient, service: Service) -> None:
    with service.db.session() as session:
        save_inventory(session, [_node("n1"), _node("n2")], 1, {})
        assert cluster_table(session).rows == []
    sign_in(client, ALICE)
    page = client.get("/web/clusters").text
    assert "one Slurm cluster" in page and 'href="/web/"' in page
    assert client.get("/web/").status_code == 200 and 'href="/web/clusters"' in client.get("/web/").text


def test_a_drain_of_a_name_no_node_carries_shows_as_its_own_row(service: Service) -> None:
    _store_site(service)
    with service.db.session() as session:
        cluster_drains.drain(session, "c", "not racked yet", actor="root")
        rows = cluster_table(session).rows
    assert [(r.cluster, r.drained, sum(r.nodes.values())) for r in rows] == [("a", False, 3), ("b", True, 2),
                                                                              ("c", True, 0)]  # fmt: skip
    page = clusters_body(cluster_table_of(service), admin=False)
    assert "not racked yet" in page and "<td class=\"\"><strong>c</strong>" in page


def cluster_table_of(service: Service) -> ClusterTable:
    """cluster_table_of reads the page's data in a session of its own."""
    with service.db.session() as session:
        return cluster_table(session)
