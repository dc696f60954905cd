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

from meta.model.states import JobState
from meta.policy.plan import ReasonCode
from meta.service.api import Service
from meta.service.operations import Operations
from meta.store.models import TaskReason
from tenants.identity import ADMIN
from tests.runtime.support import training
from tests.runtime.two_fake_clusters import WHOLE_NODE, clusters_of, daemon_over, period, two_fake_clusters


def _confine(service: Service, clusters: list[str]) -> None:
    Operations(service, ADMIN).set_tenant("tenant-a", clusters=clusters)


def test_a_confined_tenants_work_runs_on_its_cluster_only(service: Service, tmp_path: Path) -> None:
    site, a, b = two_fake_clusters()
    daemon = daemon_over(service, site, tmp_path, "tenant-clusters-test")
    # stored before the confinement (the submit check had nothing to refuse then)
    on_a = service.submit(training("on-a", "tenant-a", resources=WHOLE_NODE, sbatch={"clusters": ["a"]})).job.id
    _confine(service, ["b"])
    mine = [service.submit(training(f"t{i}", "tenant-a", resources=WHOLE_NODE)).job.id for i in range(4)]
    a.run_ticks = b.run_ticks = 2
    for _ in range(12):
        period(daemon, a, b)
        assert len(a.jobs) == 0  # a stays idle all along: tenant-a may not use it
    assert [service.status(job).state for job in mine] == [JobState.SUCCEEDED] * 4
    assert all(clusters_of(service, job) == {"b"} for job in mine)
    assert service.status(on_a).state == JobState.PENDING and clusters_of(service, on_a) == set()
    with service.db.session() as session:
        reason = session.scalars(select(TaskReason).where(TaskReason.job_id == on_a)).one()
    assert reason.code == ReasonCode.UNSCHEDULABLE_AND_UNRESOLVABLE.value
    assert reason.message == "tenant tenant-a may run only on the clusters b; the job's --clusters names a"

    other = service.submit(training("other", "tenant-b", resources=WHOLE_NODE, sbatch={"clusters": ["a"]})).job.id
    _confine(service, [])  # any cluster again: the job stored with -M a runs there
    for _ in range(6):
        period(daemon, a, b)
    assert service.status(on_a).state == JobState.SUCCEEDED and clusters_of(service, on_a) == {"a"}
    assert service.status(other).state == JobState.SUCCEEDED and clusters_of(service, other) == {"a"}
