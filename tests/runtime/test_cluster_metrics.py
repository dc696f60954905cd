"""Per-cluster gauges (issue 26) from one daemon over two fake clusters behind a ``ClusterSet``.

a and b have two 8-A100 nodes each, the same node names. A whole-node job runs on a while an
admin has drained b: a shows one live attempt and 8 of 16 GPUs free, b shows its nodes drained
(as the policy sees them), no GPUs and ``metasched_cluster_drained`` 1. After ``resume`` b's
nodes and GPUs come back; once the job ends a's attempt count is 0 again. The existing
``metasched_slurm_cluster_up`` series are set alongside, unchanged.
"""

from __future__ import annotations

from pathlib import Path

from meta.cycle.daemon import Daemon
from meta.cycle.metrics import Metrics
from meta.model.states import JobState
from meta.service import cluster_drains
from meta.service.api import Service
from slurm_bridge.clusters import ClusterSet
from slurm_bridge.fake import FakeSlurm, small_cluster
from tenants.identity import ADMIN
from tests.runtime.support import training
from tests.runtime.two_fake_clusters import WHOLE_NODE, daemon_over, period


def _value(daemon: Daemon, name: str, **labels: str) -> float | None:
    return daemon.metrics.registry.get_sample_value(name, labels)


def _cluster(daemon: Daemon, cluster: str) -> dict[str, float | None]:
    """_cluster is one cluster's per-cluster gauges, by a short name."""
    return {
        "schedulable": _value(daemon, "metasched_cluster_nodes", cluster=cluster, state="schedulable"),
        "drained_nodes": _value(daemon, "metasched_cluster_nodes", cluster=cluster, state="drained"),
        "down": _value(daemon, "metasched_cluster_nodes", cluster=cluster, state="down"),
        "total": _value(daemon, "metasched_cluster_total_gpus", cluster=cluster, gpu_type="a100"),
        "free": _value(daemon, "metasched_cluster_free_gpus", cluster=cluster, gpu_type="a100"),
        "attempts": _value(daemon, "metasched_cluster_running_attempts", cluster=cluster),
        "drained": _value(daemon, "metasched_cluster_drained", cluster=cluster),
        "up": _value(daemon, "metasched_slurm_cluster_up", cluster=cluster),
    }


def test_per_cluster_gauges_follow_work_and_an_admins_drain(service: Service, tmp_path: Path) -> None:
    a, b = FakeSlurm(small_cluster(2), first_job_id=1000), FakeSlurm(small_cluster(2), first_job_id=1000)
    site = ClusterSet({"a": a, "b": b}, background=False)
    daemon = daemon_over(service, site, tmp_path, "cluster-metrics", Metrics())
    period(daemon, a, b)  # the daemon stores the inventory: b is a known cluster to drain
    cluster_drains.drain(service.db, ADMIN, "b", "switch firmware")
    a.run_ticks = 10**9  # a's job runs until the test ends it
    job = service.submit(training("on-a", resources=WHOLE_NODE)).job.id
    for _ in range(3):
        period(daemon, a, b)
    assert service.status(job).state == JobState.RUNNING and len(a.jobs) == 1 and b.jobs == {}
    assert _cluster(daemon, "a") == {"schedulable": 2, "drained_nodes": 0, "down": 0, "total": 16, "free": 8,
                                     "attempts": 1, "drained": 0, "up": 1}  # fmt: skip
    assert _cluster(daemon, "b") == {"schedulable": 0, "drained_nodes": 2, "down": 0, "total": 0, "free": 0,
                                     "attempts": 0, "drained": 1, "up": 1}  # fmt: skip
    # the site-wide gauges are the sum over clusters, on the same basis
    assert _value(daemon, "metasched_free_gpus", gpu_type="a100") == 8
    assert _value(daemon, "metasched_cluster_gpus", gpu_type="a100") == 16

    cluster_drains.resume(service.db, ADMIN, "b")
    (running,) = a.jobs.values()
    a.finish(running.job_id)
    for _ in range(2):
        period(daemon, a, b)
    assert service.status(job).state == JobState.SUCCEEDED
    assert _cluster(daemon, "a") == {"schedulable": 2, "drained_nodes": 0, "down": 0, "total": 16, "free": 16,
                                     "attempts": 0, "drained": 0, "up": 1}  # fmt: skip
    assert _cluster(daemon, "b") == {"schedulable": 2, "drained_nodes": 0, "down": 0, "total": 16, "free": 16,
                                     "attempts": 0, "drained": 0, "up": 1}  # fmt: skip
    assert _value(daemon, "metasched_cluster_free_gpus", cluster="", gpu_type="a100") is None  # no unqualified row
