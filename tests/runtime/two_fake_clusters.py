"""One daemon over two fake Slurm clusters (issue 26): what the runtime tests of several clusters share.

``two_fake_clusters`` is a ``ClusterSet`` over clusters a and b, two 8-A100 nodes each, with the
same node names and job ids (so only the qualified names tell them apart); ``daemon_over`` is a
daemon with test-sized timeouts over it, and ``period`` runs one period and moves each fake on.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.metrics import Metrics
from meta.cycle.reconcile import ReconcileSettings
from meta.model.clusters import cluster_of
from meta.service.api import Service
from meta.store.models import Attempt
from slurm_bridge.clusters import ClusterSet
from slurm_bridge.fake import FakeSlurm, small_cluster
from tests.runtime.support import settled

WHOLE_NODE = {"cpus": 8, "memory": "64G", "gpus": 8, "gpu_type": "a100"}


def two_fake_clusters() -> tuple[ClusterSet, FakeSlurm, FakeSlurm]:
    """two_fake_clusters is the site (a and b behind one ClusterSet) and each cluster's fake Slurm."""
    a, b = FakeSlurm(small_cluster(2), first_job_id=1000), FakeSlurm(small_cluster(2), first_job_id=1000)
    return ClusterSet({"a": a, "b": b}, background=False), a, b


def daemon_over(
    service: Service, site: ClusterSet, tmp_path: Path, holder: str, metrics: Metrics | None = None
) -> Daemon:
    """daemon_over is a daemon over ``site`` that launches at once and never judges an attempt lost."""
    config = DaemonConfig(
        period_s=0.0, leader_lease_s=60.0, holder=holder, submit_timeout_s=0.0,
        launch=LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=30),
        reconcile=ReconcileSettings(unknown_window_s=0.0, lost_grace_s=600.0),
    )  # fmt: skip
    return Daemon(service.db, site, config, metrics)


def period(daemon: Daemon, *fakes: FakeSlurm) -> None:
    """period runs one daemon period, then moves each fake Slurm one step."""
    report = settled(daemon)
    assert report.error == "" and report.leader, report.error
    for fake in fakes:
        fake.advance()


def job_attempts(service: Service, job_id: str) -> list[Attempt]:
    """job_attempts are the job's attempts, by number."""
    with service.db.session() as session:
        return list(session.scalars(select(Attempt).where(Attempt.job_id == job_id).order_by(Attempt.number)))


def clusters_of(service: Service, job_id: str) -> set[str]:
    """clusters_of are the clusters any attempt of the job ran on."""
    return {cluster_of(node) for attempt in job_attempts(service, job_id) for node in attempt.nodes()}
