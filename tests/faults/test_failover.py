"""Scenario 2: two ``metasched serve`` replicas; the leader is frozen (SIGSTOP) beyond its lease.

Both replicas run with a 3 s leader lease. Each trial freezes the current leader, submits new
jobs, and measures the failover time: from the SIGSTOP to the first attempt the other replica
creates under its new epoch (epoch + 1, read from the ``leader_lease`` row and the attempts'
``epoch`` column). Then the old leader is thawed (SIGCONT) mid-whatever it was doing: it must
write nothing under its old epoch after the takeover (no attempt, no cycle row), step down to a
standby, and no Slurm job may be duplicated. The next trial freezes the new leader, so the
replicas swap roles.
"""

# ruff: noqa: B023 - the predicates defined in loops are polled at once, inside their iteration

from __future__ import annotations

import random
import signal
import time
from pathlib import Path

import pytest
from sqlalchemy import func, select

from meta.model.durations import utcnow
from meta.model.spec import spec_from_dict
from meta.model.states import JobState
from meta.service.api import Service
from meta.store.models import Attempt, CycleRecord
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

LEASE_S = 3.0


def test_frozen_leader_is_replaced_and_fenced(
    slurm_exclusive: None, pg_service: Service, tmp_path: Path
) -> None:
    rounds = trials(2, 8)
    seed = seed_of("failover")
    rng = random.Random(seed)
    # sbatch made 0.3 s slow: a freeze often lands between "launching" committed and the job id recorded
    env = {"METASCHED_FAKE_SBATCH_DELAY": "0.3"}
    replicas = {h: ServeProcess(tmp_path, h, lease_s=LEASE_S, env=env) for h in ("replica-a", "replica-b")}
    jobs: list[str] = []
    failover: list[float] = []
    takeover: list[float] = []
    stale_writes: list[str] = []
    extra_epochs = 0  # lease renewals that lapsed inside a long period (epoch churn, not a fault)
    started = time.monotonic()

    def submit(n: int, tag: str) -> None:
        for i in range(n):
            spec = small_eval(f"fo-{tag}-{i}", ("tenant-a", "tenant-b")[i % 2], "sleep 1")
            jobs.append(pg_service.submit(spec_from_dict(spec)).job.short_id)

    try:
        since = replicas["replica-a"].start()
        wait_leading(pg_service, replicas["replica-a"], since)
        replicas["replica-b"].start()
        submit(4, "warm")
        time.sleep(2)
        for trial in range(rounds):
            row = lease(pg_service)
            assert row is not None
            old_epoch, leader = row.epoch, replicas[row.holder]
            other = next(r for r in replicas.values() if r is not leader)
            assert other.alive(), other.tail()
            submit(3, f"{trial}-before")
            time.sleep(rng.uniform(0.0, 1.0))  # a random moment in the leader's period
            frozen_at = utcnow()
            leader.signal(signal.SIGSTOP)
            submit(3, f"{trial}-during")  # work only the new leader can place

            def new_epoch() -> bool:
                now = lease(pg_service)
                return now is not None and now.epoch > old_epoch and now.holder == other.holder

            try:
                wait_for(new_epoch, 30, f"{other.holder} to take over from epoch {old_epoch}")
            except AssertionError as exc:
                # say what the standby was doing: a takeover that never comes is otherwise mute
                held = lease(pg_service)
                where = f"{held.holder} epoch {held.epoch} until {held.expires_at}" if held else "none"
                raise AssertionError(
                    f"{exc}; lease now {where}; {other.holder} alive={other.alive()}:\n"
                    f"{other.tail()}\n--- {leader.holder} (frozen):\n{leader.tail()}"
                ) from None
            row = lease(pg_service)
            assert row is not None
            new, taken_at = row.epoch, row.renewed_at

            def first_placement() -> bool:
                with pg_service.db.session() as session:
                    return (
                        session.scalar(select(func.min(Attempt.created_at)).where(Attempt.epoch == new))
                        is not None
                    )

            try:
                wait_for(first_placement, 30, f"a placement under epoch {new}")
            except AssertionError as exc:
                # say what the new leader was doing: a leader that never places is otherwise mute
                raise AssertionError(f"{exc}; {other.holder} alive={other.alive()}:\n{other.tail()}") from None
            with pg_service.db.session() as session:
                first = session.scalar(select(func.min(Attempt.created_at)).where(Attempt.epoch == new))
            takeover.append((taken_at - frozen_at).total_seconds())
            failover.append((first - frozen_at).total_seconds())
            time.sleep(rng.uniform(0.5, 2.0))
            leader.signal(signal.SIGCONT)  # the old leader wakes up believing it still leads
            time.sleep(3 * 0.5 + 2)  # a few of its periods
            assert leader.alive(), f"the old leader died instead of stepping down:\n{leader.tail()}"
            with pg_service.db.session() as session:
                late_attempts = session.scalar(
                    select(func.count()).where(Attempt.epoch == old_epoch, Attempt.created_at > taken_at)
                )
                late_cycles = session.scalar(
                    select(func.count()).where(CycleRecord.epoch == old_epoch, CycleRecord.at > taken_at)
                )
            if late_attempts or late_cycles:
                stale_writes.append(
                    f"trial {trial}: epoch {old_epoch} wrote {late_attempts} attempt(s), {late_cycles} cycle(s) "
                    f"after epoch {new} took over"
                )
            now = lease(pg_service)
            # the thawed replica may only lead again through a fresh epoch (if the new leader's
            # lease lapsed meanwhile), never by resuming the old one
            assert now is not None and now.epoch >= new, f"the lease went back to an old epoch: {now.epoch}"
            if now.holder == leader.holder:
                assert now.epoch > new
            extra_epochs += now.epoch - new
        submit(3, "after")
        wait_jobs(pg_service, jobs, 240, replicas.values())
        attempts = {job: attempts_of(pg_service, job) for job in jobs}
        ids = {a.id for group in attempts.values() for a in group}
        per_attempt = slurm_jobs_of(ids)
        violations = invariant_violations(pg_service)
        unsettled = unsettled_attempts(pg_service)
        logs = {h: r.log_text() for h, r in replicas.items()}
        epochs = lease(pg_service)
    finally:
        for replica in replicas.values():
            replica.kill()
        cancel_daemon_jobs()

    stepped_down = sum(text.count("lost leadership") for text in logs.values())
    report(
        "failover",
        seed=seed,
        trials=rounds,
        violations=len(violations) + len(stale_writes),
        stale_writes=len(stale_writes),
        final_epoch=epochs.epoch if epochs else None,
        fenced_rejections_logged=stepped_down,
        extra_epochs=extra_epochs,
        jobs=len(jobs),
        attempts=len(ids),
        duplicates=duplicates(per_attempt),
        takeover_s=takeover,
        failover_s=failover,
        wall_s=time.monotonic() - started,
    )
    assert stale_writes == []
    assert violations == []
    assert unsettled == []
    assert all(pg_service.status(job).state == JobState.SUCCEEDED for job in jobs)
    assert all(len(group) == 1 for group in attempts.values()), "a failover made a task retry"
    assert duplicates(per_attempt) == 0
    assert set(per_attempt) == ids
