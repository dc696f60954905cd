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
from meta.model.clusters import cluster_of
from meta.model.states import JobState
from meta.policy.plan import ReasonCode
from meta.service import cluster_drains
from meta.service.api import Service
from meta.service.explain import explain_job
from meta.store.models import Attempt, TaskReason
from tenants.identity import ADMIN
from tests.runtime.support import training
from tests.runtime.two_fake_clusters import WHOLE_NODE, daemon_over, job_attempts, period, two_fake_clusters

RETRY = {"max_attempts": 3, "backoff": 0}


def _clusters(attempt: Attempt) -> set[str]:
    return {cluster_of(node) for node in attempt.nodes()}


def _explain(service: Service, job_id: str) -> dict[str, Any]:
    status = service.status(job_id)
    with service.db.session() as session:
        return explain_job(session, job_id, status.summary.short_id, status.state.value)


def test_a_job_runs_where_its_data_lives(service: Service, tmp_path: Path) -> None:
    site, a, b = two_fake_clusters()
    daemon = daemon_over(service, site, tmp_path, "data-test")
    a.run_ticks = b.run_ticks = 10**9
    control = service.submit(training("control", resources=WHOLE_NODE)).job.id
    period(daemon, a, b)
    (first,) = job_attempts(service, control)
    assert _clusters(first) == {"a"}  # the tie goes to a: the preference below is what moves a job to b

    soft = service.submit(training("soft", resources=WHOLE_NODE, data={"cluster": "b"})).job.id
    hard = service.submit(training("hard", resources=WHOLE_NODE, data={"cluster": "b", "required": True})).job.id
    for _ in range(2):
        period(daemon, a, b)
    assert [_clusters(x) for x in job_attempts(service, soft) + job_attempts(service, hard)] == [{"b"}, {"b"}]
    (item,) = _explain(service, soft)["tasks"]
    verdicts = {c["cluster"]: c for c in item["clusters"]}
    assert verdicts["b"]["verdict"] == "placed" and "the job's data lives here (preferred)" in verdicts["b"]["message"]
    (item,) = _explain(service, hard)["tasks"]
    assert {c["cluster"]: c["verdict"] for c in item["clusters"]} == {"a": "data_elsewhere", "b": "placed"}

    # b is full now: a preferred job goes to a rather than wait, a required one waits for b
    soft2 = service.submit(training("soft2", resources=WHOLE_NODE, data={"cluster": "b"})).job.id
    hard2 = service.submit(training("hard2", resources=WHOLE_NODE, data={"cluster": "b", "required": True})).job.id
    for _ in range(2):
        period(daemon, a, b)
    assert [_clusters(x) for x in job_attempts(service, soft2)] == [{"a"}]
    assert job_attempts(service, hard2) == [] and service.status(hard2).state == JobState.PENDING


def test_a_retry_resumes_only_where_its_checkpoint_was_written(service: Service, tmp_path: Path) -> None:
    site, a, b = two_fake_clusters()
    daemon = daemon_over(service, site, tmp_path, "data-test")
    a.run_ticks = b.run_ticks = 10**9
    ckpt = {"dir": "/scratch/ckpt"}
    local = service.submit(training("local", resources=WHOLE_NODE, retry=RETRY, checkpoint=ckpt,
                                    data={"cluster": "b"})).job.id  # fmt: skip
    shared = service.submit(training("shared", resources=WHOLE_NODE, retry=RETRY, checkpoint={**ckpt, "shared": True},
                                     data={"cluster": "b"})).job.id  # fmt: skip
    for _ in range(3):
        period(daemon, a, b)
    firsts = [job_attempts(service, job)[0] for job in (local, shared)]
    assert [_clusters(x) for x in firsts] == [{"b"}, {"b"}]
    with service.db.session() as session:
        for attempt in firsts:
            report(session, attempt.id, attempt.fencing_token, 100, f"/scratch/ckpt/{attempt.job_id}/100")

    # b is drained (its running jobs go on), then both Slurm jobs die with their nodes
    cluster_drains.drain(service.db, ADMIN, "b", "switch firmware")
    for job in list(b.jobs.values()):
        b.finish(job.job_id, "NODE_FAIL", 0)
    for _ in range(4):
        period(daemon, a, b)
    retried = job_attempts(service, shared)
    assert len(retried) == 2 and _clusters(retried[1]) == {"a"}  # readable anywhere: a at once
    assert len(job_attempts(service, local)) == 1 and service.status(local).state == JobState.PENDING
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
        period(daemon, a, b)
    attempts = job_attempts(service, local)
    assert len(attempts) == 2 and _clusters(attempts[1]) == {"b"}
    assert f"/scratch/ckpt/{local}/100" in b.job_of(attempts[1].id).script  # it resumes from the checkpoint b wrote
