"""End to end on the real dev cluster: the daemon schedules training, inference and evaluation
through Slurm; sacct shows the right account and GRES; a failing job is retried with a new
token; cancel reaches Slurm."""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from meta.model.states import AttemptState, JobState
from tenants.secrets import set_secret
from tests.harness import DaemonHarness, sacct_wait, slurm_jobs_per_attempt, squeue_names

pytestmark = pytest.mark.slurm

GANG = {
    "kind": "training",
    "name": "gang-a100",
    "tenant": "tenant-a",
    "workers": 2,
    "resources": {"cpus": 2, "memory": "2G", "gpus": 8, "gpu_type": "a100"},
    "topology": "require-same-switch",
    "time_limit": "5m",
    "command": 'echo "rank $SLURM_PROCID gpus=$CUDA_VISIBLE_DEVICES"; sleep 2',
}
INFER = {
    "kind": "inference",
    "name": "embed",
    "tenant": "tenant-b",
    "partitions": 4,
    "resources": {"cpus": 1, "memory": "1G", "gpus": 1, "gpu_type": "t4"},
    "output": "/tmp/replaced-per-test",
    "time_limit": "5m",
    "command": 'echo "partition $METASCHED_PARTITION" > "$METASCHED_OUTPUT_DIR/part.txt"',
}
SECRET_VALUE = "s3cr3t-value-never-stored"
EVAL = {
    "kind": "evaluation",
    "name": "eval",
    "tenant": "tenant-a",
    "resources": {"cpus": 1, "memory": "1G", "gpus": 1},
    "time_limit": "5m",
    "secrets": ["DEMO_TOKEN"],
    # fails unless the secret's value reached the job's environment on the node
    "command": f'sleep 1; test "$DEMO_TOKEN" = "{SECRET_VALUE[:6]}"-value-never-stored',
}
FAILS = {
    "kind": "evaluation",
    "name": "exits-3",
    "tenant": "tenant-a",
    "resources": {"cpus": 1, "memory": "1G"},
    "time_limit": "5m",
    "retry": {"max_attempts": 2, "backoff": 0, "on": ["user_error"]},
    "command": "exit 3",
}


def _attempts(h: DaemonHarness, job: str):
    return [a for t in h.service.status(job).tasks for a in t.attempts]


def test_three_kinds_run_through_slurm_and_failures_retry(harness: DaemonHarness, tmp_path: Path) -> None:
    set_secret(tmp_path / "secrets", "tenant-a", "DEMO_TOKEN", SECRET_VALUE)
    infer_spec = dict(INFER, output=str(tmp_path / "out"))
    specs = [("gang", GANG), ("infer", infer_spec), ("eval", EVAL), ("fails", FAILS)]
    jobs = {name: harness.submit(spec) for name, spec in specs}
    periods = harness.run_until(harness.all_finished(list(jobs.values())), timeout_s=180)
    print(f"\nall four jobs finished after {periods} periods")

    assert harness.state(jobs["gang"]) == JobState.SUCCEEDED
    assert harness.state(jobs["infer"]) == JobState.SUCCEEDED
    assert harness.state(jobs["eval"]) == JobState.SUCCEEDED
    assert harness.state(jobs["fails"]) == JobState.FAILED

    gang = _attempts(harness, jobs["gang"])
    assert len(gang) == 1 and sorted(gang[0].nodes) == ["a100n1", "a100n2"]
    infer = _attempts(harness, jobs["infer"])
    assert len(infer) == 4 and all(n.startswith("t4n") for a in infer for n in a.nodes)

    written = tmp_path / "out" / jobs["infer"] / "_manifest.json"
    harness.run_until(written.exists, timeout_s=30)  # written off the period, as the job's owner
    manifest = json.loads(written.read_text())
    assert manifest["complete"] and len(manifest["partitions"]) == 4
    for partition in manifest["partitions"]:
        files = partition["manifest"]["files"]
        assert [f["path"] for f in files] == ["part.txt"]
        text = (Path(partition["manifest"]["root"]) / "part.txt").read_text()
        assert text == f"partition {partition['name']}\n"

    failed = _attempts(harness, jobs["fails"])
    assert [a.state for a in failed] == [AttemptState.FAILED, AttemptState.FAILED]
    assert [a.exit_code for a in failed] == [3, 3]
    assert failed[1].fencing_token > failed[0].fencing_token
    assert failed[0].slurm_job_id != failed[1].slurm_job_id

    # sacct agrees: one Slurm job per attempt, the tenant as account, typed GRES
    by_name = sacct_wait({f"ms-{a.id}" for a in gang + infer + failed})
    gang_record = by_name[f"ms-{gang[0].id}"]
    assert gang_record.account == "tenant-a"
    assert "gres/gpu:a100=16" in gang_record.alloc_tres
    for attempt in infer:
        record = by_name[f"ms-{attempt.id}"]
        assert record.account == "tenant-b" and "gres/gpu:t4=1" in record.alloc_tres
    assert by_name[f"ms-{failed[0].id}"].exit_code == "3:0"
    # the secret's value is in no stored script: not in Slurm's accounting copy of the batch script
    [eval_attempt] = _attempts(harness, jobs["eval"])
    stored = subprocess.run(
        ["sacct", "-B", "-j", str(eval_attempt.slurm_job_id)], capture_output=True, text=True, timeout=60
    ).stdout
    assert "DEMO_TOKEN" in stored and SECRET_VALUE not in stored

    all_ids = {a.id for a in gang + infer + failed}
    assert all(len(ids) == 1 for ids in slurm_jobs_per_attempt(all_ids).values())


def test_cancel_reaches_slurm(harness: DaemonHarness) -> None:
    long = dict(EVAL, name="long", command="sleep 300", secrets=[])  # a declared secret must be set: none here
    job = harness.submit(long)
    harness.run_until(lambda: harness.state(job) == JobState.RUNNING and _running_in_slurm(harness, job), 60)
    harness.service.cancel(job)
    harness.run_until(lambda: harness.state(job) == JobState.CANCELLED, 60)
    attempt = _attempts(harness, job)[0]
    assert attempt.state == AttemptState.CANCELLED
    assert f"ms-{attempt.id}" not in squeue_names()
    record = sacct_wait({f"ms-{attempt.id}"}).get(f"ms-{attempt.id}")
    assert record is not None and record.state.startswith("CANCELLED")


def _running_in_slurm(h: DaemonHarness, job: str) -> bool:
    attempts = _attempts(h, job)
    return bool(attempts) and attempts[-1].state == AttemptState.RUNNING
