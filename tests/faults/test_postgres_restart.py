"""Scenario 3: PostgreSQL (the queue and the whole durable state) restarted under a running daemon.

``metasched serve`` works through a stream of jobs while PostgreSQL is restarted
(``pg_ctlcluster <version> <name> restart``) at seeded random moments. Every period that hits
the dead store ends with a logged error; the daemon waits for the next period and goes on. The
recovery time is from the restart command returning to the daemon's next lease renewal. At the
end: every job succeeded once, one Slurm job per attempt, no attempt stuck in
created/launching/launch_unknown, I1–I6 clean. PostgreSQL is always left running.
"""

# ruff: noqa: B023 - the predicates defined in loops are polled at once, inside their iteration

from __future__ import annotations

import random
import subprocess
import time
from pathlib import Path

import pytest

from meta.model.durations import utcnow
from meta.model.spec import spec_from_dict
from meta.model.states import JobState
from meta.service.api import Service
from tests.faults.support import report, seed_of, small_eval, trials
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
    wait_leading,
)

pytestmark = pytest.mark.slurm


def pg_cluster() -> tuple[str, str]:
    """pg_cluster is the (version, name) of the local PostgreSQL cluster, from ``pg_lsclusters -h``."""
    out = subprocess.run(
        ["pg_lsclusters", "-h"], capture_output=True, text=True, check=True, timeout=30
    ).stdout
    version, name = out.split()[:2]
    return version, name


def pg_online() -> bool:
    """pg_online tells whether the cluster reports online."""
    out = subprocess.run(["pg_lsclusters", "-h"], capture_output=True, text=True, timeout=30).stdout
    return "online" in out


def pg_ctl(action: str) -> None:
    """pg_ctl runs ``pg_ctlcluster <version> <name> <action>``."""
    version, name = pg_cluster()
    subprocess.run(["pg_ctlcluster", version, name, action], check=True, capture_output=True, timeout=120)


def test_postgres_restart_mid_cycle(slurm_exclusive: None, pg_service: Service, tmp_path: Path) -> None:
    restarts = trials(2, 6)
    seed = seed_of("postgres")
    rng = random.Random(seed)
    daemon = ServeProcess(tmp_path, "pg-restart", lease_s=10.0)
    jobs: list[str] = []
    recovery: list[float] = []
    started = time.monotonic()
    try:
        since = daemon.start()
        wait_leading(pg_service, daemon, since)
        for trial in range(restarts):
            for i in range(4):
                spec = small_eval(f"pg-{trial}-{i}", ("tenant-a", "tenant-b")[i % 2], "sleep 2")
                jobs.append(pg_service.submit(spec_from_dict(spec)).job.short_id)
            time.sleep(rng.uniform(0.2, 2.5))  # somewhere in a cycle, a launch or a reconcile
            pg_ctl("restart")
            back = utcnow()

            def renewed() -> bool:
                row = lease(pg_service)
                return row is not None and row.holder == daemon.holder and row.renewed_at > back

            recovery.append(wait_for(renewed, 60, "the daemon to renew its lease after the restart", 0.1))
            assert daemon.alive(), daemon.tail()
        wait_jobs(pg_service, jobs, 240, [daemon])
        attempts = {job: attempts_of(pg_service, job) for job in jobs}
        ids = {a.id for group in attempts.values() for a in group}
        per_attempt = slurm_jobs_of(ids)
        violations = invariant_violations(pg_service)
        unsettled = unsettled_attempts(pg_service)
        log = daemon.log_text()
    finally:
        daemon.kill()
        if not pg_online():
            pg_ctl("start")
        cancel_daemon_jobs()

    errors = log.count("period failed")
    report(
        "postgres-restart",
        seed=seed,
        trials=restarts,
        violations=len(violations),
        periods_failed_logged=errors,
        jobs=len(jobs),
        attempts=len(ids),
        duplicates=duplicates(per_attempt),
        unsettled=len(unsettled),
        recovery_s=recovery,
        wall_s=time.monotonic() - started,
    )
    assert errors >= 1, "no period noticed the restarts (the log shows no error)"
    assert violations == []
    assert unsettled == []
    assert all(pg_service.status(job).state == JobState.SUCCEEDED for job in jobs)
    assert all(len(group) == 1 for group in attempts.values()), "a restart made a task retry"
    assert duplicates(per_attempt) == 0
    assert set(per_attempt) == ids
