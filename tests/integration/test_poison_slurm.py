"""On the real dev cluster: poison jobs are quarantined and another tenant's job launches in the same period."""

from __future__ import annotations

import pytest

from meta.model.spec import EvaluationSpec, RetryPolicy
from meta.model.states import JobState
from meta.service.api import Service
from tests.harness import DaemonHarness, sacct_wait
from tests.runtime.support import attempts_of, submit
from tests.runtime.test_poison_jobs import unchecked

pytestmark = [pytest.mark.slurm, pytest.mark.postgres]

GOOD = {
    "kind": "evaluation",
    "name": "good-neighbour",
    "tenant": "tenant-b",
    "command": "true",
    "time_limit": "2m",
    "resources": {"cpus": 1, "memory": "256M"},
}


def poisons() -> list[EvaluationSpec]:
    """poisons are specs older rules or a validation gap let through; today's rules refuse them."""
    base = {"tenant": "tenant-a", "command": "true", "time_limit_s": 120.0,
            "resources": EvaluationSpec.model_validate(GOOD).resources}
    return [
        unchecked(EvaluationSpec, name="huge-backoff", **base,
                  retry=RetryPolicy.model_construct(max_attempts=3, backoff_s=1e20, on=RetryPolicy().on)),
        unchecked(EvaluationSpec, name="surrogate", **{**base, "command": "echo \udcff"}),
        unchecked(EvaluationSpec, name="option-qos", qos="normal --uid=0", **base),
    ]


def test_poison_jobs_are_quarantined_while_another_tenant_runs(harness: DaemonHarness) -> None:
    service: Service = harness.service
    bad = [submit(service, spec) for spec in poisons()]
    good_job = harness.submit(GOOD)
    report = harness.daemon.period()  # one period: the poisons are set aside, the good job is placed
    # and handed to the launch pool (its sbatch runs behind the period)
    assert report.error == "" and report.placed == 1 and report.launched + report.queued == 1, report
    for job_id, (task_id,) in bad:
        status = service.status(job_id)
        assert status.state == JobState.FAILED and status.tasks[0].reason.startswith("InvalidSpec: ")
        assert attempts_of(service.db, task_id) == []
    harness.run_until(harness.all_finished([good_job]), timeout_s=90)
    assert harness.state(good_job) == JobState.SUCCEEDED
    (attempt,) = service.status(good_job).tasks[0].attempts
    record = sacct_wait({f"ms-{attempt.id}"})[f"ms-{attempt.id}"]
    assert record.state == "COMPLETED" and record.account == "tenant-b"
