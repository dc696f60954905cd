"""Clusters join and leave without a restart (issue 26, ``--clusters auto``): the site follows slurmdbd's list.

A daemon over a following ``ClusterSet`` whose home is fake cluster a. slurmdbd (a's
``sacctmgr show clusters``) first lists only a; then b registers: b joins at the next refresh,
its nodes come in with the inventory and a job confined to b runs there — no restart. b is then
deregistered while that job runs: b stays (its job must not look lost) and leaves only once the
job has ended; the joins and the leave are audited. slurmdbd down: the members stay.
"""

from __future__ import annotations

from pathlib import Path

from meta.model.states import JobState
from meta.service.api import Service
from meta.store import audit
from slurm_bridge.clusters import ClusterSet
from slurm_bridge.errors import SlurmTransient
from slurm_bridge.fake import FakeSlurm, small_cluster
from tests.runtime.support import training
from tests.runtime.two_fake_clusters import WHOLE_NODE, clusters_of, daemon_over, period


def test_a_cluster_registered_later_joins_and_leaves_only_when_its_work_is_done(
    service: Service, tmp_path: Path
) -> None:
    a, b = FakeSlurm(small_cluster(2), first_job_id=1000), FakeSlurm(small_cluster(2), first_job_id=1000)
    a.registered = ["a"]
    site = ClusterSet({"a": a}, background=False, connect={"b": b}.__getitem__)
    daemon = daemon_over(service, site, tmp_path, "registry-test")
    daemon.members.cadence.every_s = 0.0  # follow slurmdbd every period here
    on_b = service.submit(training("on-b", resources=WHOLE_NODE, sbatch={"clusters": ["b"]})).job.id
    for _ in range(2):
        period(daemon, a, b)
    assert site.clusters == ("a",) and service.status(on_b).state == JobState.PENDING

    a.registered = ["a", "b"]  # sacctmgr add cluster b; b's slurmctld registers
    b.run_ticks = 10**9  # b's job runs until the test ends it
    for _ in range(4):
        period(daemon, a, b)
    assert site.clusters == ("a", "b")
    assert service.status(on_b).state == JobState.RUNNING and clusters_of(service, on_b) == {"b"}

    a.registered = ["a"]  # b deregistered while the job runs there: b stays
    for _ in range(3):
        period(daemon, a, b)
    assert site.clusters == ("a", "b") and service.status(on_b).state == JobState.RUNNING

    a.accounting_fault = SlurmTransient("sacctmgr: error: slurmdbd not responding")
    (job,) = b.jobs.values()
    b.finish(job.job_id)
    for _ in range(3):
        period(daemon, a, b)
    assert service.status(on_b).state == JobState.SUCCEEDED
    assert site.clusters == ("a", "b")  # slurmdbd down: nothing changes

    a.accounting_fault = None
    period(daemon, a, b)
    assert site.clusters == ("a",)
    with service.db.session() as session:
        seen = [(e.action, e.subject) for e in audit.read(session) if e.action.startswith("cluster.")]
    assert sorted(seen) == [("cluster.join", "b"), ("cluster.leave", "b")]
