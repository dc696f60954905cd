"""Bulkheads: one job's bad data quarantines that job, and the same period goes on for everyone else.

A poison job here is one whose stored spec the current rules refuse (accepted under older ones,
or through a gap in validation), or whose data breaks a step of the cycle (rendering, sbatch,
the reconciler's success hook). Each test shows another tenant's job launching in the very
period that quarantined the poison, and the quarantine visible in status, explain and the audit.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner
from sqlalchemy import select

import meta.cycle.actuate.actuator
from cli.main import cli
from meta.cycle.daemon import Daemon, PeriodReport
from meta.model.kinds import Topology
from meta.model.spec import (
    AnySpec,
    CheckpointSpec,
    EvaluationSpec,
    InferenceSpec,
    RetryPolicy,
    TrainingSpec,
)
from meta.model.states import AttemptState, TaskState
from meta.service.api import Service
from meta.store import audit
from meta.store.models import Attempt
from slurm_bridge.fake import FakeSlurm
from tests.runtime.support import attempts_of, evaluation, place, settled, share, submit, task, training
from tests.runtime.test_daemon import _daemon

RES = {"cpus": 2, "memory": "8G", "gpus": 1, "gpu_type": "a100"}


def unchecked(kind: type[AnySpec], **fields: Any) -> AnySpec:
    """unchecked builds a spec without validation: what older rules or a validation gap let through."""
    base: dict[str, Any] = {"name": "poison", "tenant": "mallory", "command": "python x.py",
                            "resources": evaluation().resources, "env": {}, "secrets": (), "qos": None,
                            "partition": None, "retry": RetryPolicy(), "locality": None, "script": None,
                            "time_limit_s": 600.0, "priority_class": None, "queue": "default"}
    if kind is InferenceSpec:
        base.update(partitions=1, output="/tmp/ms-poison-out", deadline=None, max_parallel=None, preemptible=True)
    elif kind is TrainingSpec:
        base.update(workers=1, topology=Topology.NONE, checkpoint=None, preemptible=False, min_runtime_s=0.0)
    else:
        base.update(preemptible=True)
    base.update(fields)
    return kind.model_construct(**base)


POISONS = {
    "huge-backoff": lambda: unchecked(EvaluationSpec, retry=RetryPolicy.model_construct(
        max_attempts=3, backoff_s=1e20, on=RetryPolicy().on)),
    "surrogate-partition": lambda: unchecked(EvaluationSpec, partition="x\udcff"),
    "surrogate-command": lambda: unchecked(EvaluationSpec, command="echo \udcff"),
    "surrogate-env": lambda: unchecked(EvaluationSpec, env={"A": "x\udcff"}),
    "surrogate-output": lambda: unchecked(InferenceSpec, output="/tmp/out-\udcff"),
    "surrogate-checkpoint": lambda: unchecked(
        TrainingSpec, checkpoint=CheckpointSpec.model_construct(dir="/ckpt/\udcff", interval_s=600.0,
                                                                restore_cost_s=60.0)),
    "option-in-qos": lambda: unchecked(EvaluationSpec, qos="high --uid=0"),
}


def assert_quarantined(service: Service, job_id: str, task_id: str) -> None:
    """assert_quarantined: failed with an InvalidSpec reason in status, explain and the audit."""
    assert task(service.db, task_id).state == TaskState.FAILED.value
    status = service.status(job_id)
    assert status.summary.state == "failed"
    assert status.tasks[0].reason.startswith("InvalidSpec: "), status.tasks[0].reason
    explained = CliRunner().invoke(cli, ["explain", job_id, "--json"], env={"METASCHED_DB": service.db.url})
    assert explained.exit_code == 0, explained.output
    assert '"code": "InvalidSpec"' in explained.output
    with service.db.session() as session:
        lines = [a for a in audit.read(session) if a.action == "job.quarantine"]
    assert [a.subject for a in lines] == [status.summary.short_id]
    assert lines[0].detail["reason"].startswith("InvalidSpec: ")


def launched(service: Service, task_id: str) -> bool:
    """launched: the task's attempt reached Slurm (it has a Slurm job id)."""
    return any(a.slurm_job_id for a in attempts_of(service.db, task_id))


def one_period(daemon: Daemon) -> PeriodReport:
    report = settled(daemon)
    assert report.error == "", report.error
    return report


@pytest.mark.parametrize("poison", sorted(POISONS))
def test_a_poison_pending_job_is_quarantined_and_others_launch_in_the_same_period(
    service: Service, tmp_path: Path, poison: str
) -> None:
    fake = FakeSlurm()
    bad_job, (bad_task,) = submit(service, POISONS[poison]())
    good_job, (good_task,) = submit(service, evaluation("good", tenant="other"))
    report = one_period(_daemon(service, fake, tmp_path))
    assert launched(service, good_task) and report.launched == 1
    assert attempts_of(service.db, bad_task) == []
    assert_quarantined(service, bad_job, bad_task)
    assert all("\udcff" not in s and "--uid=0" not in s for s in fake.submitted_scripts)
    assert one_period(_daemon(service, fake, tmp_path)).error == ""  # and it stays set aside


def test_a_script_that_cannot_be_encoded_fails_only_its_attempt(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeSlurm()
    _, (first,) = submit(service, evaluation("first", tenant="other"))
    bad_job, (bad_task,) = submit(service, evaluation("renders-badly", tenant="mallory"))
    _, (last,) = submit(service, evaluation("last", tenant="third"))
    real_render = meta.cycle.actuate.actuator.render

    def render(request: Any) -> str:  # a renderer gap: a lone surrogate reaches the script text
        script = real_render(request)
        return script + "\necho \udcff\n" if request.job_id == bad_job else script

    monkeypatch.setattr(meta.cycle.actuate.actuator, "render", render)
    report = one_period(_daemon(service, fake, tmp_path))
    assert launched(service, first) and launched(service, last) and report.launched == 2
    (bad,) = attempts_of(service.db, bad_task)
    assert bad.state == AttemptState.FAILED.value and bad.failure_category == "invalid_spec"
    assert bad.slurm_job_id is None and len(fake.submitted_scripts) == 2
    assert_quarantined(service, bad_job, bad_task)


def test_an_unexpected_error_in_one_sbatch_keeps_the_batch_ids(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeSlurm()
    _, (first,) = submit(service, evaluation("first", tenant="other"))
    _, (odd_task,) = submit(service, evaluation("odd", tenant="mallory"))
    _, (last,) = submit(service, evaluation("last", tenant="third"))
    real_submit = fake.submit

    def submit_(script: str, *, timeout_s: float | None = None, run_as: object = None) -> int:
        if "--account=mallory" in script:
            raise UnicodeEncodeError("utf-8", "x", 0, 1, "surrogates not allowed")
        return real_submit(script, timeout_s=timeout_s, run_as=run_as)  # type: ignore[arg-type]

    monkeypatch.setattr(fake, "submit", submit_)
    one_period(_daemon(service, fake, tmp_path))
    assert launched(service, first) and launched(service, last)
    (odd,) = attempts_of(service.db, odd_task)
    # nothing is known of that sbatch: the reconciler looks it up before anything is sent again
    assert odd.state == AttemptState.LAUNCH_UNKNOWN.value


def test_a_running_job_whose_stored_spec_is_refused_fails_alone_when_it_ends(
    service: Service, tmp_path: Path
) -> None:
    fake = FakeSlurm()
    bad_job, (bad_task,) = submit(service, POISONS["huge-backoff"]())
    attempt_id = place(service.db, bad_task, [share("node1", gpus=1)], AttemptState.RUNNING)
    job = fake._record(f"#!/bin/bash\n#SBATCH --job-name=ms-{attempt_id}\n#SBATCH --nodelist=node1\n")
    job.state = "RUNNING"
    with service.db.session() as session:
        session.get(Attempt, attempt_id).slurm_job_id = str(job.job_id)
    _, (good_task,) = submit(service, training("good", tenant="other"))
    fake._end(job, "FAILED", 1)  # its first failure: a retry would compute the 1e20 s backoff
    report = one_period(_daemon(service, fake, tmp_path))
    assert launched(service, good_task) and report.launched == 1
    (bad,) = attempts_of(service.db, bad_task)
    assert bad.state == AttemptState.FAILED.value
    assert task(service.db, bad_task).state == TaskState.FAILED.value
    assert task(service.db, bad_task).reason.startswith("InvalidSpec: ")


def test_a_success_hook_that_breaks_on_one_attempt_quarantines_only_it(
    service: Service, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    fake = FakeSlurm()
    daemon = _daemon(service, fake, tmp_path)
    _, (ok_task,) = submit(service, evaluation("fine", tenant="other"))
    bad_job, (bad_task,) = submit(service, evaluation("hook-breaks", tenant="mallory"))
    one_period(daemon)
    assert launched(service, ok_task) and launched(service, bad_task)
    fake.advance()  # running
    one_period(daemon)
    fake.run_ticks = 0
    fake.advance()  # both end with exit 0 in the same period: they would move as one group
    real_hook = daemon.reconciler.on_success

    def hook(session: Any, attempt: Attempt) -> None:
        if attempt.job_id == bad_job:
            raise ValueError("an output path this host cannot describe")
        real_hook(session, attempt)

    monkeypatch.setattr(daemon.reconciler, "on_success", hook)
    _, (late_task,) = submit(service, evaluation("late", tenant="third"))
    one_period(daemon)
    assert task(service.db, ok_task).state == TaskState.SUCCEEDED.value
    assert launched(service, late_task)
    assert_quarantined(service, bad_job, bad_task)
    with service.db.session() as session:
        assert session.scalar(select(Attempt.failure_category).where(Attempt.task_id == bad_task)) == "invalid_spec"
