"""``metasched explain`` per cluster (issue 26): where each task runs and why not the other clusters.

One daemon over two fake clusters behind a ``ClusterSet``: a has two 8-A100 nodes, b two 8-H100
nodes (the same node names and job ids). The stored inventory's names are then ``a/node1`` ...,
and explain adds each task's ``clusters``: placed here, not in -M, drained, never fits, busy. A
single-cluster site's answer has no ``clusters`` at all (unchanged).
"""

from __future__ import annotations

import warnings
from pathlib import Path
from typing import Any

import pytest

with warnings.catch_warnings():
    warnings.simplefilter("ignore", DeprecationWarning)
    from fastapi.testclient import TestClient

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.service import cluster_drains
from meta.service.api import Service
from meta.service.explain import explain_job
from meta.service.http import create_app
from meta.store.models import Tenant
from slurm_bridge.clusters import ClusterSet
from slurm_bridge.fake import FakeSlurm, small_cluster
from tenants.identity import ADMIN
from tests.api_support import ROOT, TestAuthenticator, principal_for
from tests.runtime.support import settled, training

A100_NODE = {"cpus": 8, "memory": "64G", "gpus": 8, "gpu_type": "a100"}
H100 = {"cpus": 8, "memory": "64G", "gpus": 4, "gpu_type": "h100"}


def _site() -> tuple[ClusterSet, FakeSlurm, FakeSlurm]:
    a = FakeSlurm(small_cluster(2), first_job_id=1000)
    b = FakeSlurm(small_cluster(2, gpu_type="h100"), first_job_id=1000)
    a.run_ticks = b.run_ticks = 10**9  # jobs run until the test ends
    return ClusterSet({"a": a, "b": b}, background=False), a, b


def _daemon(service: Service, slurm: Any, tmp_path: Path) -> Daemon:
    config = DaemonConfig(period_s=0.0, leader_lease_s=60.0, holder="explain-test", submit_timeout_s=0.0,
                          launch=LaunchSettings(log_dir=str(tmp_path / "logs")))  # fmt: skip
    return Daemon(service.db, slurm, config)


def _periods(daemon: Daemon, count: int = 2) -> None:
    for _ in range(count):
        report = settled(daemon)
        assert report.error == "" and report.leader, report.error


def _explain(service: Service, job_id: str) -> dict[str, Any]:
    status = service.status(job_id)  # before the session: SQLite's writer lock is one at a time
    with service.db.session() as session:
        return explain_job(session, job_id, status.summary.short_id, status.state.value)


def _verdicts(service: Service, job_id: str, task: int = 0) -> dict[str, tuple[str, str]]:
    item = _explain(service, job_id)["tasks"][task]
    return {c["cluster"]: (c["verdict"], c["message"]) for c in item["clusters"]}


def test_each_task_says_where_it_runs_and_why_not_the_other_cluster(service: Service, tmp_path: Path) -> None:
    site, _, _ = _site()
    daemon = _daemon(service, site, tmp_path)
    h100 = service.submit(training("h100", resources=H100)).job.id
    fills = [service.submit(training(f"fill{i}", resources=A100_NODE)).job.id for i in range(2)]
    _periods(daemon)
    waits = service.submit(training("waits", resources=A100_NODE)).job.id
    confined = service.submit(training("confined", resources=A100_NODE, sbatch={"clusters": ["b"]})).job.id
    _periods(daemon)

    runs = _verdicts(service, h100)
    assert runs["b"][0] == "placed" and " here on b/node" in runs["b"][1]
    assert runs["a"] == ("never_fits", "no node has h100 GPUs (types here: a100)")
    (item,) = _explain(service, h100)["tasks"]
    assert item["clusters"][1]["nodes"] and item["clusters"][1]["nodes"][0].startswith("b/")
    assert all(_verdicts(service, job)["a"][0] == "placed" for job in fills)
    busy = _verdicts(service, waits)
    code = _explain(service, waits)["tasks"][0]["code"]  # HeldForGang: a node is held for it, first in line
    assert busy == {
        "a": ("busy", f"fits, but the last cycle found no room for it here ({code})"),
        "b": ("never_fits", "no node has a100 GPUs (types here: h100)"),
    }
    assert _verdicts(service, confined) == {
        "a": ("not_listed", "not in the job's --clusters (b)"),
        "b": ("never_fits", "no node has a100 GPUs (types here: h100)"),
    }


def test_a_drained_cluster_is_named_with_the_admins_reason(service: Service, tmp_path: Path) -> None:
    site, _, _ = _site()
    daemon = _daemon(service, site, tmp_path)
    _periods(daemon, 1)  # the daemon stores the inventory
    cluster_drains.drain(service.db, ADMIN, "b", "switch firmware")
    job = service.submit(training("h100", resources=H100)).job.id
    _periods(daemon)
    assert _verdicts(service, job) == {
        "a": ("never_fits", "no node has h100 GPUs (types here: a100)"),
        "b": ("drained", "drained by an admin: switch firmware (no new work goes there)"),
    }


def test_a_gang_larger_than_each_cluster_says_so_per_cluster(service: Service, tmp_path: Path) -> None:
    site, _, _ = _site()
    daemon = _daemon(service, site, tmp_path)
    _periods(daemon, 1)
    any_gpu = {"cpus": 8, "memory": "64G", "gpus": 8}  # 4 such nodes on the site, 2 on each cluster
    gang = service.submit(training("gang", resources=any_gpu, workers=3)).job.id
    _periods(daemon)
    verdicts = _verdicts(service, gang)
    assert {name: verdict for name, (verdict, _) in verdicts.items()} == {"a": "too_few_nodes", "b": "too_few_nodes"}
    assert all("fits only 2 of 3 workers" in message for _, message in verdicts.values())
    assert "no single Slurm cluster fits 3 workers" in _explain(service, gang)["tasks"][0]["message"]


def test_the_api_answers_the_clusters_beside_the_old_keys(service: Service, tmp_path: Path) -> None:
    site, _, _ = _site()
    job = service.submit(training("h100", resources=H100)).job.id
    _periods(_daemon(service, site, tmp_path))
    with TestClient(create_app(service, TestAuthenticator(), principal_for, secrets_root=tmp_path / "s")) as api:
        body = api.get(f"/v1/jobs/{job}/explain", headers={"Authorization": ROOT}).json()
    (item,) = body["tasks"]
    assert [(c["cluster"], c["verdict"]) for c in item["clusters"]] == [("a", "never_fits"), ("b", "placed")]
    assert {"task", "name", "state", "code", "message", "remedy", "cycle", "at"} <= set(item)  # kept as they were


def test_a_single_cluster_site_gets_no_clusters(service: Service, tmp_path: Path) -> None:
    job = service.submit(training("alone", resources=A100_NODE)).job.id
    waits = service.submit(training("waits", resources=A100_NODE, workers=3)).job.id
    _periods(_daemon(service, FakeSlurm(small_cluster(2)), tmp_path))
    assert all("clusters" not in item for j in (job, waits) for item in _explain(service, j)["tasks"])


def test_a_tenant_confined_to_the_other_cluster_is_named(service: Service, tmp_path: Path) -> None:
    if not hasattr(Tenant, "clusters"):
        pytest.skip("this store has no tenant confinement (tenants.clusters)")
    site, _, _ = _site()
    daemon = _daemon(service, site, tmp_path)
    _periods(daemon, 1)
    job = service.submit(training("any", resources={"cpus": 8, "memory": "64G", "gpus": 1})).job.id
    with service.db.session() as session:
        session.get(Tenant, "acme").clusters = ["b"]
    verdicts = _verdicts(service, job)
    assert verdicts["a"] == ("tenant_confined", "the tenant may run only on b (an admin's setting)")
    assert verdicts["b"][0] == "fits"
