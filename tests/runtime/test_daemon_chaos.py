"""Seeded chaos over Daemon.period: submit faults, failing reads, job failures, drains and cancels.

After every period I1–I6 must hold against what the fake Slurm shows; in the end every job has
ended, each attempt had at most one Slurm job, and no metasched job is left running in Slurm.
"""

from __future__ import annotations

import random
from pathlib import Path

import pytest
from sqlalchemy import select

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.invariants import check_invariants
from meta.cycle.reconcile import ReconcileSettings
from meta.model.states import JobState
from meta.service.api import Service
from meta.store.models import Attempt
from slurm_bridge.errors import SlurmTransient
from slurm_bridge.fake import REJECTED, TRANSIENT, UNKNOWN_AFTER, UNKNOWN_BEFORE, FakeSlurm
from slurm_bridge.inventory import build_inventory
from tests.runtime.support import checkpointing, evaluation, inference, settled, training

ENDED = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
RETRY = {"on": ["node_failure", "preempted", "lost", "launch_failure", "oom", "user_error"], "max_attempts": 4, "backoff": 0}


def _jobs(service: Service, rng: random.Random, tmp_path: Path) -> list[str]:
    node = {"cpus": 8, "memory": "32G", "gpus": 8, "gpu_type": "a100"}
    half = {"cpus": 4, "memory": "16G", "gpus": 4, "gpu_type": "a100"}
    specs = [
        training("gang", workers=2, resources=node, retry=RETRY),
        checkpointing("ckpt", ckpt_dir=str(tmp_path / "ck"), resources=half, retry=RETRY),
        inference(str(tmp_path / "out"), partitions=5, max_parallel=3, retry=RETRY),
        *(evaluation(f"e{i}", resources=half if rng.random() < 0.5 else {"cpus": 1, "memory": "4G", "gpus": 1}, retry=RETRY) for i in range(5)),
        *(training(f"t{i}", resources=half, retry=RETRY) for i in range(3)),
    ]
    return [service.submit(spec).job.id for spec in specs]


def _invariants(service: Service, fake: FakeSlurm) -> list[str]:
    active = {job.key for job in fake.active_jobs()}
    with service.db.session() as session:
        return check_invariants(session, slurm_active_names=active, nodes=build_inventory(fake.sinfo()).nodes)


@pytest.mark.parametrize("seed", range(6))
def test_chaos_keeps_invariants_and_finishes(service: Service, tmp_path: Path, seed: int) -> None:
    rng = random.Random(seed)
    fake = FakeSlurm()
    fake.run_ticks = 2
    fake.outcome = lambda job: rng.choices(
        [("COMPLETED", 0), ("NODE_FAIL", 0), ("FAILED", 1), ("OUT_OF_MEMORY", 0)], weights=[8, 1, 1, 1]
    )[0]
    config = DaemonConfig(
        period_s=0.0,
        holder="chaos",
        submit_timeout_s=0.0,  # a fake sbatch cannot land late: no need to outwait a submit timeout
        launch=LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=0),
        reconcile=ReconcileSettings(unknown_window_s=0.0, lost_grace_s=3600.0),
    )
    daemon = Daemon(service.db, fake, config)
    jobs = _jobs(service, rng, tmp_path)
    cancelled: set[str] = set()
    for period in range(200):
        calm = period >= 120  # the last stretch runs without faults so that everything can end
        if not calm:
            if rng.random() < 0.3:
                fake.fail_next_submits(rng.choice([UNKNOWN_BEFORE, UNKNOWN_AFTER, TRANSIENT, REJECTED]))
            fake.squeue_fault = SlurmTransient("squeue down") if rng.random() < 0.1 else None
            if rng.random() < 0.1:
                name = rng.choice(sorted(fake.nodes))
                drained = rng.random() < 0.5
                fake.set_node(name, "IDLE", ["DRAIN"] if drained else [])
            if rng.random() < 0.03:
                victim = rng.choice(jobs)
                service.cancel(victim)
                cancelled.add(victim)
        else:
            fake.submit_faults.clear()
            fake.squeue_fault = None
            for name in fake.nodes:
                fake.set_node(name, "IDLE")
        report = settled(daemon)
        assert report.leader
        assert _invariants(service, fake) == [], f"seed {seed} period {period}: {report}"
        fake.advance()
        if calm and all(service.status(job).state in ENDED for job in jobs):
            break
    states = {job: service.status(job).state for job in jobs}
    assert all(state in ENDED for state in states.values()), states
    assert all(states[job] == JobState.CANCELLED or job not in cancelled for job in jobs if states[job] != JobState.SUCCEEDED)
    assert [j.name for j in fake.active_jobs()] == []
    with service.db.session() as session:
        attempts = list(session.scalars(select(Attempt)))
    for attempt in attempts:
        assert len(fake.jobs_for(attempt.id)) <= 1, f"attempt {attempt.id} has several Slurm jobs"
