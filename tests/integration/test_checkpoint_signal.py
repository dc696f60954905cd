"""On the real dev cluster: metasched sends the checkpoint signal only to jobs that asked for it.

A job that does not trap signals, with a short time limit, submitted through msbatch and through
plain sbatch: both must complete (State COMPLETED, ExitCode 0:0). Before the fix every msbatch
job was rendered with ``--signal=B:USR1@60``; Slurm sends it when fewer than 60 s remain, and may
send it earlier (its time-limit check runs periodically): with ``-t 2`` the signal came after
45-60 s and killed ``sleep 75`` with exit 138 (FAILED), while plain sbatch completed.

Beside them, a training job that declared a checkpoint but does not trap USR1 is killed by the
(now capped, 12 s) signal before its limit: metasched reports it preempted, with a reason that
says so, and requeues it — not as the user's failure.
"""

from __future__ import annotations

import os
import shutil
import subprocess
import sys
import time
import uuid
from pathlib import Path

import pytest

from meta.cycle.reconcile import SIGNAL_KILL_REASON
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, JobState
from meta.service.api import Service
from tests.harness import DaemonHarness, SlurmRecord, sacct_records

pytestmark = pytest.mark.slurm

TIME_LIMIT = "2"  # minutes, as msbatch/sbatch -t
# Longer than the 60 s the old signal (B:USR1@60, up to ~15 s early on this cluster) allowed; well
# inside the 120 s limit, so without a signal it completes.
SLEEP_S = 75
GRACE_S = 60  # `metasched serve --grace` default: what production jobs got
_FINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}


def _msbatch(db_url: str, *argv: str) -> str:
    """_msbatch runs the msbatch command (as users do) and returns the job id it prints."""
    command = [shutil.which("msbatch")] if shutil.which("msbatch") else [sys.executable, "-c", _MSBATCH_MAIN]
    env = dict(os.environ, METASCHED_DB=db_url)
    for variable in ("METASCHED_TENANT", "SBATCH_ACCOUNT", "SBATCH_TIMELIMIT"):
        env.pop(variable, None)
    done = subprocess.run([*command, "--parsable", *argv], capture_output=True, text=True, env=env, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


_MSBATCH_MAIN = "import sys; from cli.sbatch.msbatch import main; sys.exit(main())"


def _sbatch(*argv: str) -> str:
    """_sbatch submits with plain sbatch and returns the Slurm job id."""
    done = subprocess.run(["sbatch", "--parsable", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def _ended(names: set[str], timeout_s: float) -> dict[str, SlurmRecord]:
    """_ended polls sacct until every named job has an ended record."""
    deadline = time.monotonic() + timeout_s
    while True:
        by_name = {r.key: r for r in sacct_records() if r.key in names}
        if set(by_name) == names and all(r.state not in ("PENDING", "RUNNING") for r in by_name.values()):
            return by_name
        assert time.monotonic() < deadline, f"not ended after {timeout_s:.0f}s: {by_name}"
        time.sleep(1)


def _attempts(service: Service, job: str):
    return [a for t in service.status(job).tasks for a in t.attempts]


def test_jobs_that_do_not_trap_signals_complete_and_a_checkpointing_one_is_preempted(
    slurm_exclusive: None, pg_service: Service, tmp_path: Path
) -> None:
    started = time.monotonic()
    h = DaemonHarness(pg_service, tmp_path, grace_s=GRACE_S)
    try:
        tag = uuid.uuid4().hex[:8]
        shape = ["-A", "tenant-a", "-t", TIME_LIMIT, "-N", "1", "--gpus=1"]
        plain_name = f"plain-no-trap-{tag}"
        _sbatch(*shape, "-J", plain_name, "-o", str(tmp_path / "plain.out"), "--wrap", f"sleep {SLEEP_S}")
        ms_job = _msbatch(str(pg_service.db.url), *shape, "-J", f"no-trap-{tag}", "--wrap", f"sleep {SLEEP_S}")
        ckpt_job = h.submit(
            {
                "kind": "training",
                "name": f"ckpt-no-trap-{tag}",
                "tenant": "tenant-a",
                "resources": {"cpus": 1, "memory": "1G", "gpus": 1},
                "time_limit": "2m",
                "checkpoint": {"dir": str(tmp_path / "ckpt")},
                "command": "sleep 300",  # outlives the limit: only the signal or the limit ends it
            }
        )

        def first_ckpt_attempt_ended() -> bool:
            attempts = _attempts(h.service, ckpt_job)
            return bool(attempts) and attempts[0].state not in LIVE_ATTEMPT_STATES

        def done() -> bool:
            return h.state(ms_job) in _FINAL and first_ckpt_attempt_ended()

        periods = h.run_until(done, timeout_s=170)
        print(f"\nmsbatch job and the first checkpointing attempt ended after {periods} periods")

        # the msbatch job ran to completion, as under sbatch
        assert h.state(ms_job) == JobState.SUCCEEDED
        [attempt] = _attempts(h.service, ms_job)
        assert attempt.exit_code == 0
        records = _ended({f"ms-{attempt.id}", plain_name}, timeout_s=60)
        for record in records.values():
            assert (record.state, record.exit_code) == ("COMPLETED", "0:0"), record

        # the checkpointing job that does not trap USR1: preempted by metasched's signal, requeued
        first = _attempts(h.service, ckpt_job)[0]
        assert first.state == AttemptState.PREEMPTED and first.failure_category == "preempted", first
        assert first.exit_code == 138
        status = h.service.status(ckpt_job)
        assert any(SIGNAL_KILL_REASON in line.reason for line in status.recent)
        assert status.state in {JobState.PENDING, JobState.RUNNING}  # requeued, not failed
        h.service.cancel(ckpt_job)
    finally:
        h.close()
    print(f"took {time.monotonic() - started:.0f}s")

