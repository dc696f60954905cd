"""An admin's drain of a cluster (issue 26, ``metasched cluster drain``): no new placements there, running work finishes.

One daemon over two fake clusters behind a ``ClusterSet`` (a and b, two 8-A100 nodes each, the
same node names and job ids). A job confined to b (``sbatch.clusters``) runs there; then b is
drained: new work goes to a only, even while b has a free node, a job confined to b waits with
its nodes drained as its reason, and the job already on b runs on to its end — never stopped,
cancelled nor placed again. After ``resume`` b takes work again.
"""

from __future__ import annotations

from pathlib import Path

from sqlalchemy import select

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.reconcile import ReconcileSettings
from meta.model.clusters import cluster_of
from meta.model.states import AttemptState, JobState
from meta.policy.plan import ReasonCode
from meta.service import cluster_drains
from meta.service.api import Service
from meta.store.models import Attempt, TaskReason
from slurm_bridge.clusters import ClusterSet
from slurm_bridge.fake import FakeSlurm, small_cluster
from tenants.identity import ADMIN
from tests.runtime.support import settled, training

WHOLE_NODE = {"cpus": 8, "memory": "64G", "gpus": 8, "gpu_type": "a100"}
ENDED = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}


def _site() -> tuple[ClusterSet, FakeSlurm, FakeSlurm]:
    a, b = FakeSlurm(small_cluster(2), first_job_id=1000), FakeSlurm(small_cluster(2), first_job_id=1000)
    return ClusterSet({"a": a, "b": b}, background=False), a, b


def _daemon(service: Service, site: ClusterSet, tmp_path: Path) -> Daemon:
    config = DaemonConfig(
        period_s=0.0, leader_lease_s=60.0, holder="drain-test", submit_timeout_s=0.0,
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


def _attempts(service: Service, job_id: str) -> list[Attempt]:
    with service.db.session() as session:
        return list(session.scalars(select(Attempt).where(Attempt.job_id == job_id)))


def _clusters_of(service: Service, job_id: str) -> set[str]:
    return {cluster_of(node) for attempt in _attempts(service, job_id) for node in attempt.nodes()}


def test_a_drained_cluster_gets_no_new_work_while_its_running_job_finishes(service: Service, tmp_path: Path) -> None:
    site, a, b = _site()
    daemon = _daemon(service, site, tmp_path)
    b.run_ticks = 10**9  # b's jobs run until the test ends them
    long = service.submit(training("long", resources=WHOLE_NODE, sbatch={"clusters": ["b"]})).job.id
    for _ in range(3):
        _period(daemon, a, b)
    assert service.status(long).state == JobState.RUNNING and _clusters_of(service, long) == {"b"}
    (running,) = _attempts(service, long)

    drained = cluster_drains.drain(service.db, ADMIN, "b", "switch firmware")
    assert drained["new"] is True and drained["known"] is True  # the daemon stored an inventory with b's nodes
    a.run_ticks = 3  # a's two nodes stay busy for a few periods: the third job could only go to b's free node
    free = [service.submit(training(f"t{i}", resources=WHOLE_NODE)).job.id for i in range(3)]
    confined = service.submit(training("on-b", resources=WHOLE_NODE, sbatch={"clusters": ["b"]})).job.id
    for _ in range(12):
        _period(daemon, a, b)
        assert len(b.jobs) == 1  # nothing new was sent to b
    assert [service.status(job).state for job in free] == [JobState.SUCCEEDED] * 3
    assert all(_clusters_of(service, job) == {"a"} for job in free)
    assert service.status(confined).state == JobState.PENDING and _attempts(service, confined) == []
    with service.db.session() as session:
        reason = session.scalars(select(TaskReason).where(TaskReason.job_id == confined)).one()
    assert reason.code == ReasonCode.NODE_UNHEALTHY.value, reason.message  # its nodes are drained (for metasched)

    # the job on b ran on, untouched: one attempt, never stopped, its Slurm job never cancelled
    assert service.status(long).state == JobState.RUNNING and b.cancels == []
    (job,) = b.jobs.values()
    b.finish(job.job_id)
    _period(daemon, a, b)
    assert service.status(long).state == JobState.SUCCEEDED
    assert [(x.id, x.state) for x in _attempts(service, long)] == [(running.id, AttemptState.SUCCEEDED.value)]

    cluster_drains.resume(service.db, ADMIN, "b")
    b.run_ticks = 1
    for _ in range(4):
        _period(daemon, a, b)
        if service.status(confined).state in ENDED:
            break
    assert service.status(confined).state == JobState.SUCCEEDED and _clusters_of(service, confined) == {"b"}
    assert len(b.jobs) == 2
