"""Data locality and checkpoint stickiness (issue 26) with one daemon over two fake clusters.

a and b have two 8-A100 nodes each (the same node names and job ids); with nothing to choose
between them a job goes to a. A job whose data lives on b (``data: {cluster: b}``) runs on b,
required or only preferred. Two checkpointing training jobs run on b and report a checkpoint; b is
drained and both Slurm jobs end NODE_FAIL: the one whose checkpoint dir is shared by every cluster
(``checkpoint.shared``) is retried on a at once, the other waits for b, says why (``explain`` too:
a is ``checkpoint_elsewhere``), and resumes on b from its checkpoint once b is resumed.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

from sqlalchemy import select

from checkpoint.registry import report
from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.reconcile import ReconcileSettings
from meta.model.clusters import cluster_of
from meta.model.states import JobState
from meta.policy.plan import ReasonCode
from meta.service import cluster_drains
from meta.service.api import Service
from meta.service.explain import explain_job
from meta.store.models import Attempt, TaskReason
from slurm_bridge.clusters import ClusterSet
from slurm_bridge.fake import FakeSlurm, small_cluster
from tenants.identity import ADMIN
from tests.runtime.support import settled, training

WHOLE_NODE = {"cpus": 8, "memory": "64G", "gpus": 8, "gpu_type": "a100"}
RETRY = {"max_attempts": 3, "backoff": 0}


def _site() -> tuple[ClusterSet, FakeSlurm, FakeSlurm]:
    a, b = FakeSlurm(small_cluster(2), first_job_id=1000), FakeSlurm(small_cluster(2), first_job_id=1000)
    return ClusterSet({"a": a, "b": b}, background=False), a, b


def _daemon(service: Service, site: ClusterSet, tmp_path: Path) -> Daemon:
    config = DaemonConfig(
        period_s=0.0, leader_lease_s=60.0, holder="data-test", submit_timeout_s=0.0,
        launch=LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=30),
        reconcile=ReconcileSettings(unknown_window_s=0.0, lost_grace_s=600.0),
    )  # fmt: skip
    return Daemon(service.db, site, config)


def _period(daemon: Daemon, *fakes: FakeSlurm) -> None:
    """_period runs one daemon period, then moves each fake Slurm one step."""
    done = settled(daemon)
    assert done.error == "" and done.leader, done.error
    for fake in fakes:
        fake.advance()


def _attempts(service: Service, job_id: str) -> list[Attempt]:
    with service.db.session() as session:
        return list(session.scalars(select(Attempt).where(Attempt.job_id == job_id).order_by(Attempt.number)))


def _clusters(attempt: Attempt) -> set[str]:
    return {cluster_of(node) for node in attempt.nodes()}


def _explain(service: Service, job_id: str) -> dict[str, Any]:
    status = service.status(job_id)
    with service.db.session() as session:
        return explain_job(session, job_id, status.summary.short_id, status.state.value)


def test_a_job_runs_where_its_data_lives(service: Service, tmp_path: Path) -> None:
    site, a, b = _site()
    daemon = _daemon(service, site, tmp_path)
    a.run_ticks = b.run_ticks = 10**9
    control = service.submit(training("control", resources=WHOLE_NODE)).job.id
    _period(daemon, a, b)
    (first,) = _attempts(service, control)
    assert _clusters(first) == {"a"}  # the tie goes to a: the preference below is what moves a job to b

    soft = service.submit(training("soft", resources=WHOLE_NODE, data={"cluster": "b"})).job.id
    hard = service.submit(training("hard", resources=WHOLE_NODE, data={"cluster": "b", "required": True})).job.id
    for _ in range(2):
        _period(daemon, a, b)
    assert [_clusters(x) for x in _attempts(service, soft) + _attempts(service, hard)] == [{"b"}, {"b"}]
    (item,) = _explain(service, soft)["tasks"]
    verdicts = {c["cluster"]: c for c in item["clusters"]}
    assert verdicts["b"]["verdict"] == "placed" and "the job's data lives here (preferred)" in verdicts["b"]["message"]
    (item,) = _explain(service, hard)["tasks"]
    assert {c["cluster"]: c["verdict"] for c in item["clusters"]} == {"a": "data_elsewhere", "b": "placed"}

    # b is full now: a preferred job goes to a rather than wait, a required one waits for b
    soft2 = service.submit(training("soft2", resources=WHOLE_NODE, data={"cluster": "b"})).job.id
    hard2 = service.submit(training("hard2", resources=WHOLE_NODE, data={"cluster": "b", "required": True})).job.id
    for _ in range(2):
        _period(daemon, a, b)
    assert [_clusters(x) for x in _attempts(service, soft2)] == [{"a"}]
    assert _attempts(service, hard2) == [] and service.status(hard2).state == JobState.PENDING


def test_a_retry_resumes_only_where_its_checkpoint_was_written(service: Service, tmp_path: Path) -> None:
    site, a, b = _site()
    daemon = _daemon(service, site, tmp_path)
    a.run_ticks = b.run_ticks = 10**9
    ckpt = {"dir": "/scratch/ckpt"}
    local = service.submit(training("local", resources=WHOLE_NODE, retry=RETRY, checkpoint=ckpt,
                                    data={"cluster": "b"})).job.id  # fmt: skip
    shared = service.submit(training("shared", resources=WHOLE_NODE, retry=RETRY, checkpoint={**ckpt, "shared": True},
                                     data={"cluster": "b"})).job.id  # fmt: skip
    for _ in range(3):
        _period(daemon, a, b)
    firsts = [_attempts(service, job)[0] for job in (local, shared)]
    assert [_clusters(x) for x in firsts] == [{"b"}, {"b"}]
    with service.db.session() as session:
        for attempt in firsts:
            report(session, attempt.id, attempt.fencing_token, 100, f"/scratch/ckpt/{attempt.job_id}/100")

    # b is drained (its running jobs go on), then both Slurm jobs die with their nodes
    cluster_drains.drain(service.db, ADMIN, "b", "switch firmware")
    for job in list(b.jobs.values()):
        b.finish(job.job_id, "NODE_FAIL", 0)
    for _ in range(4):
        _period(daemon, a, b)
    retried = _attempts(service, shared)
    assert len(retried) == 2 and _clusters(retried[1]) == {"a"}  # readable anywhere: a at once
    assert len(_attempts(service, local)) == 1 and service.status(local).state == JobState.PENDING
    with service.db.session() as session:
        reason = session.scalars(select(TaskReason).where(TaskReason.job_id == local)).one()
    assert reason.code == ReasonCode.NODE_UNHEALTHY.value
    assert reason.message.startswith("it resumes from a checkpoint written on b, readable only there; b has no node "
                                     "up that could host it"), reason.message
    (item,) = _explain(service, local)["tasks"]
    verdicts = {c["cluster"]: c for c in item["clusters"]}
    assert verdicts["a"]["verdict"] == "checkpoint_elsewhere"
    assert verdicts["a"]["message"] == "resumes from a checkpoint written on b, readable only there"
    assert verdicts["b"]["verdict"] == "drained" and "the retry waits for it" in verdicts["b"]["message"]

    cluster_drains.resume(service.db, ADMIN, "b")
    for _ in range(3):
        _period(daemon, a, b)
    attempts = _attempts(service, local)
    assert len(attempts) == 2 and _clusters(attempts[1]) == {"b"}
    assert f"/scratch/ckpt/{local}/100" in b.job_of(attempts[1].id).script  # it resumes from the checkpoint b wrote
