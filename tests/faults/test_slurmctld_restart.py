"""Scenario 4 (with 5): slurmctld restarted while jobs run, and sbatch timeouts around it.

The Slurm controller is stopped (SIGTERM to the pid in /run/slurmctld.pid, as ``deploy/devcluster
down`` stops it), left down for a seeded random 1–4 s, and started again the way
``deploy/devcluster up`` starts it (``deploy/devcluster up --no-postgres`` starts only what is not
running and records its pid). Meanwhile ``metasched serve`` keeps working through jobs; a few
sbatch calls also time out before or after Slurm accepted them (fakebin/sbatch). Slurm errors are
unknowns, never job failures: every job succeeds with one attempt per task and one Slurm job per
attempt, no attempt failed or lost, I1–I6 clean. The controller is always up at the end.
"""

# ruff: noqa: B023 - the predicates defined in loops are polled at once, inside their iteration

from __future__ import annotations

import os
import random
import signal
import subprocess
import time
from pathlib import Path

import pytest

from meta.model.durations import utcnow
from meta.model.spec import spec_from_dict
from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from tests.faults.support import REPO, report, seed_of, small_eval, trials
from tests.harness import (
    ServeProcess,
    attempts_of,
    cancel_daemon_jobs,
    duplicates,
    invariant_violations,
    lease,
    slurm_jobs_of,
    unsettled_attempts,
    wait_for,
    wait_jobs,
)

pytestmark = pytest.mark.slurm

PIDFILE = Path("/run/slurmctld.pid")


def controller_up() -> bool:
    """controller_up tells whether ``scontrol ping`` says the controller is UP."""
    try:
        out = subprocess.run(["scontrol", "ping"], capture_output=True, text=True, timeout=15).stdout
    except subprocess.TimeoutExpired:
        return False
    return "is UP" in out


def stop_controller() -> None:
    """stop_controller sends SIGTERM to slurmctld and waits until its process is gone."""
    pid = int(PIDFILE.read_text().split()[0])
    os.kill(pid, signal.SIGTERM)
    wait_for(lambda: not Path(f"/proc/{pid}").exists(), 30, f"slurmctld {pid} to exit", 0.1)


def start_controller() -> None:
    """start_controller starts slurmctld as the dev cluster does and waits for ``scontrol ping``."""
    done = subprocess.run(
        [str(REPO / "deploy" / "devcluster"), "up", "--no-postgres"],
        capture_output=True, text=True, timeout=300, stdin=subprocess.DEVNULL,
    )  # fmt: skip
    if done.returncode != 0 and not controller_up():
        subprocess.run(["/usr/sbin/slurmctld"], capture_output=True, timeout=60)
    wait_for(controller_up, 60, "scontrol ping to answer", 0.5)


def test_slurmctld_restart_is_an_unknown_not_a_failure(
    slurm_exclusive: None, pg_service: Service, tmp_path: Path
) -> None:
    restarts = trials(2, 5)
    seed = seed_of("slurmctld")
    rng = random.Random(seed)
    control = tmp_path / "sbatch.control"
    control.write_text(
        "".join(f"{rng.choice(['before', 'after'])}\npass\npass\n" for _ in range(restarts * 2))
    )
    env = {
        "METASCHED_FAKE_SBATCH_CONTROL": str(control),
        "METASCHED_FAKE_SBATCH_SLEEP": "6",
        "METASCHED_FAKE_SBATCH_DELAY": "0.1",
    }
    daemon = ServeProcess(tmp_path, "ctld-restart", lease_s=10.0, env=env)
    jobs: list[str] = []
    recovery: list[float] = []
    down: list[float] = []
    started = time.monotonic()
    try:
        daemon.start()
        for trial in range(restarts):
            for i in range(5):
                # some finish while the controller is down, some are launched around it
                command = "sleep 1" if i % 2 else "sleep 4"
                spec = small_eval(f"ctld-{trial}-{i}", ("tenant-a", "tenant-b")[i % 2], command)
                jobs.append(pg_service.submit(spec_from_dict(spec)).job.short_id)
            time.sleep(rng.uniform(0.5, 2.5))
            stop_controller()
            t_down = rng.uniform(1.0, 4.0)
            time.sleep(t_down)
            start_controller()
            up_at = utcnow()
            down.append(t_down)

            def renewed() -> bool:
                row = lease(pg_service)
                return row is not None and row.renewed_at > up_at

            recovery.append(wait_for(renewed, 60, "the daemon's next period after the restart", 0.1))
            assert daemon.alive(), daemon.tail()
        wait_jobs(pg_service, jobs, 300, [daemon])
        attempts = {job: attempts_of(pg_service, job) for job in jobs}
        ids = {a.id for group in attempts.values() for a in group}
        per_attempt = slurm_jobs_of(ids)
        violations = invariant_violations(pg_service)
        unsettled = unsettled_attempts(pg_service)
        log = daemon.log_text()
    finally:
        daemon.kill()
        if not controller_up():
            start_controller()
        cancel_daemon_jobs()

    bad = [
        a for group in attempts.values() for a in group if a.state in (AttemptState.FAILED, AttemptState.LOST)
    ]
    injected = (control.parent / "sbatch.control.log").read_text().split()
    report(
        "slurmctld-restart",
        seed=seed,
        trials=restarts,
        launch_faults=injected.count("before") + injected.count("after"),
        violations=len(violations),
        # how Slurm's absence showed: reads that failed (the period ends) and sbatch calls that timed out
        slurm_read_errors=log.count("period error: slurm"),
        unknown_launches=log.count("has an unknown outcome"),
        jobs=len(jobs),
        attempts=len(ids),
        failed_or_lost=len(bad),
        duplicates=duplicates(per_attempt),
        controller_down_s=down,
        recovery_s=recovery,
        wall_s=time.monotonic() - started,
    )
    assert bad == [], [f"{a.id} {a.state} {a.reason}" for a in bad]
    assert violations == []
    assert unsettled == []
    assert all(pg_service.status(job).state == JobState.SUCCEEDED for job in jobs)
    assert all(len(group) == 1 for group in attempts.values()), "a controller restart made a task retry"
    assert duplicates(per_attempt) == 0
    assert set(per_attempt) == ids
