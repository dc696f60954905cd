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

from meta.model.states import AttemptState, JobState
from meta.policy.plan import ReasonCode
from meta.service import cluster_drains
from meta.service.api import Service
from meta.store.models import TaskReason
from tenants.identity import ADMIN
from tests.runtime.support import training
from tests.runtime.two_fake_clusters import (
    WHOLE_NODE,
    clusters_of,
    daemon_over,
    job_attempts,
    period,
    two_fake_clusters,
)

ENDED = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}


def test_a_drained_cluster_gets_no_new_work_while_its_running_job_finishes(service: Service, tmp_path: Path) -> None:
    site, a, b = two_fake_clusters()
    daemon = daemon_over(service, site, tmp_path, "drain-test")
    b.run_ticks = 10**9  # b's jobs run until the test ends them
    long = service.submit(training("long", resources=WHOLE_NODE, sbatch={"clusters": ["b"]})).job.id
    for _ in range(3):
        period(daemon, a, b)
    assert service.status(long).state == JobState.RUNNING and clusters_of(service, long) == {"b"}
    (running,) = job_attempts(service, long)

    drained = cluster_drains.drain(service.db, ADMIN, "b", "switch firmware")
    assert drained["new"] is True and drained["known"] is True  # the daemon stored an inventory with b's nodes
    a.run_ticks = 3  # a's two nodes stay busy for a few periods: the third job could only go to b's free node
    free = [service.submit(training(f"t{i}", resources=WHOLE_NODE)).job.id for i in range(3)]
    confined = service.submit(training("on-b", resources=WHOLE_NODE, sbatch={"clusters": ["b"]})).job.id
    for _ in range(12):
        period(daemon, a, b)
        assert len(b.jobs) == 1  # nothing new was sent to b
    assert [service.status(job).state for job in free] == [JobState.SUCCEEDED] * 3
    assert all(clusters_of(service, job) == {"a"} for job in free)
    assert service.status(confined).state == JobState.PENDING and job_attempts(service, confined) == []
    with service.db.session() as session:
        reason = session.scalars(select(TaskReason).where(TaskReason.job_id == confined)).one()
    assert reason.code == ReasonCode.NODE_UNHEALTHY.value, reason.message  # its nodes are drained (for metasched)

    # the job on b ran on, untouched: one attempt, never stopped, its Slurm job never cancelled
    assert service.status(long).state == JobState.RUNNING and b.cancels == []
    (job,) = b.jobs.values()
    b.finish(job.job_id)
    period(daemon, a, b)
    assert service.status(long).state == JobState.SUCCEEDED
    assert [(x.id, x.state) for x in job_attempts(service, long)] == [(running.id, AttemptState.SUCCEEDED.value)]

    cluster_drains.resume(service.db, ADMIN, "b")
    b.run_ticks = 1
    for _ in range(4):
        period(daemon, a, b)
        if service.status(confined).state in ENDED:
            break
    assert service.status(confined).state == JobState.SUCCEEDED and clusters_of(service, confined) == {"b"}
    assert len(b.jobs) == 2
