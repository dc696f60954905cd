"""Where a tenant may run (issue 26, ``tenant set --clusters``): the daemon places a confined tenant's work on its clusters only.

One daemon over two fake clusters behind a ``ClusterSet`` (a and b, two 8-A100 nodes each, the
same node names and job ids). With tenant-a confined to b, its whole-node jobs all go to b even
while a is idle (two at a time, the rest wait for b), tenant-b's go anywhere, and a job that was
stored with ``-M a`` before the confinement waits, unresolvable, with the tenant's words. Clearing
the setting lets tenant-a's work use a again.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.reconcile import ReconcileSettings
from meta.model.clusters import cluster_of
from meta.model.states import JobState
from meta.policy.plan import ReasonCode
from meta.service.api import Service
from meta.service.operations import Operations
from meta.store.models import Attempt, TaskReason
from slurm_bridge.clusters import ClusterSet
from slurm_bridge.fake import FakeSlurm, small_cluster
from tenants.identity import ADMIN
from tests.runtime.support import settled, training

WHOLE_NODE = {"cpus": 8, "memory": "64G", "gpus": 8, "gpu_type": "a100"}


def _site() -> tuple[ClusterSet, FakeSlurm, FakeSlurm]:
    a, b = FakeSlurm(small_cluster(2), first_job_id=1000), FakeSlurm(small_cluster(2), first_job_id=1000)
    return ClusterSet({"a": a, "b": b}, background=False), a, b


def _daemon(service: Service, site: ClusterSet, tmp_path: Path) -> Daemon:
    config = DaemonConfig(
        period_s=0.0, leader_lease_s=60.0, holder="tenant-clusters-test", submit_timeout_s=0.0,
        launch=LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=30),
        reconcile=ReconcileSettings(unknown_window_s=0.0, lost_grace_s=600.0),
    )  # fmt: skip
    return Daemon(service.db, site, config)


def _period(daemon: Daemon, *fakes: FakeSlurm) -> None:
    """_period runs one daemon period, then moves each fake Slurm one step."""
    report = settled(daemon)
    assert report.error == "" and report.leader, report.error
    for fake in fakes:
        fake.advance()


def _clusters_of(service: Service, job_id: str) -> set[str]:
    with service.db.session() as session:
        attempts = session.scalars(select(Attempt).where(Attempt.job_id == job_id))
        return {cluster_of(node) for attempt in attempts for node in attempt.nodes()}


def _confine(service: Service, clusters: list[str]) -> None:
    Operations(service, ADMIN).set_tenant("tenant-a", clusters=clusters)


def test_a_confined_tenants_work_runs_on_its_cluster_only(service: Service, tmp_path: Path) -> None:
    site, a, b = _site()
    daemon = _daemon(service, site, tmp_path)
    # stored before the confinement (the submit check had nothing to refuse then)
    on_a = service.submit(training("on-a", "tenant-a", resources=WHOLE_NODE, sbatch={"clusters": ["a"]})).job.id
    _confine(service, ["b"])
    mine = [service.submit(training(f"t{i}", "tenant-a", resources=WHOLE_NODE)).job.id for i in range(4)]
    a.run_ticks = b.run_ticks = 2
    for _ in range(12):
        _period(daemon, a, b)
        assert len(a.jobs) == 0  # a stays idle all along: tenant-a may not use it
    assert [service.status(job).state for job in mine] == [JobState.SUCCEEDED] * 4
    assert all(_clusters_of(service, job) == {"b"} for job in mine)
    assert service.status(on_a).state == JobState.PENDING and _clusters_of(service, on_a) == set()
    with service.db.session() as session:
        reason = session.scalars(select(TaskReason).where(TaskReason.job_id == on_a)).one()
    assert reason.code == ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE.value
    assert reason.message == "tenant tenant-a may run only on the clusters b; the job's --clusters names a"

    other = service.submit(training("other", "tenant-b", resources=WHOLE_NODE, sbatch={"clusters": ["a"]})).job.id
    _confine(service, [])  # any cluster again: the job stored with -M a runs there
    for _ in range(6):
        _period(daemon, a, b)
    assert service.status(on_a).state == JobState.SUCCEEDED and _clusters_of(service, on_a) == {"a"}
    assert service.status(other).state == JobState.SUCCEEDED and _clusters_of(service, other) == {"a"}
