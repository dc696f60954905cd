"""Scenario 6: exactly-once inference outputs under late workers, retries and daemon kills.

(a) A partition attempt loses its lease (``lease_expires_at`` set in the past, as when the
    scheduler stops seeing it) and its worker calls ``metasched commit``: refused with exit 1
    and a message naming the expired lease. The attempt is then declared lost (what the
    reconciler does after its lost grace), a second attempt runs and commits; the late worker
    tries again and is refused as no longer current. After the job finishes, the late
    attempt's staging dir is garbage-collected and ``metasched outputs JOB --json`` shows
    exactly one output per partition, from its final attempt.
(b) N partitions writing files under a ``metasched serve`` that is killed with SIGKILL while
    some partitions' Slurm jobs are cancelled behind its back (each one is retried as a new
    attempt), and every superseded attempt's worker tries to commit late: exactly N visible
    outputs, each from its partition's final attempt, manifest checksums matching the files.
"""

# ruff: noqa: B023 - the predicates defined in loops are polled at once, inside their iteration

from __future__ import annotations

import random
import subprocess
import time
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import update

from checkpoint import attempt_secret
from meta.model.durations import utcnow
from meta.model.spec import spec_from_dict
from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from meta.store.lifecycle import attempt_event
from meta.store.models import Attempt
from tests.faults.support import inference, metasched, output_problems, report, seed_of, trials
from tests.harness import (
    DaemonHarness,
    ServeProcess,
    attempts_of,
    cancel_daemon_jobs,
    duplicates,
    invariant_violations,
    slurm_jobs_of,
    wait_for,
    wait_jobs,
    wait_leading,
)

pytestmark = pytest.mark.slurm

WRITE = (
    'echo "partition $METASCHED_PARTITION attempt $METASCHED_ATTEMPT_ID" > "$METASCHED_OUTPUT_DIR/part.txt"\n'
)


def _late_commit(service: Service, attempt_id: str, token: int, staging: Path) -> subprocess.CompletedProcess[str]:
    """_late_commit is a worker of a superseded or expired attempt calling ``metasched commit``.

    Such a worker holds its attempt's secret (its batch script exported it): the test gives the
    attempt a known one, so the refusal it sees is the fencing's, not the proof's.
    """
    secret, digest = attempt_secret.new_secret()
    with service.db.session() as session:
        session.execute(update(Attempt).where(Attempt.id == attempt_id).values(secret_hash=digest))
    return metasched("commit", "--attempt", attempt_id, "--token", str(token), "--dir", str(staging),
                     env={"METASCHED_ATTEMPT_SECRET": secret})  # fmt: skip


def _staging(output: Path, attempt_id: str) -> Path:
    return output / "_attempts" / attempt_id


def test_late_partition_after_lease_expiry_is_refused(harness: DaemonHarness, tmp_path: Path) -> None:
    jobs_n = trials(1, 4)
    refused: list[str] = []
    accepted: list[str] = []
    problems: list[str] = []
    started = time.monotonic()
    for j in range(jobs_n):
        output = tmp_path / f"out-{j}"
        job = harness.submit(inference(f"late-{j}", output, 2, WRITE + "sleep 4\n"))
        output = output / job  # metasched writes staging and the manifest in the job's own folder

        def running() -> bool:
            attempts = attempts_of(harness.service, job)
            return len(attempts) == 2 and all(a.state == AttemptState.RUNNING for a in attempts)

        harness.run_until(running, 60)
        first = next(a for t in harness.service.status(job).tasks if t.name == "0" for a in t.attempts)
        staging = _staging(output, first.id)
        wait_for(lambda: (staging / "part.txt").exists(), 30, "the partition's file")

        # the scheduler has not seen the attempt for a lease: its lease is in the past
        with harness.service.db.session() as session:
            session.execute(
                update(Attempt)
                .where(Attempt.id == first.id)
                .values(lease_expires_at=utcnow() - timedelta(minutes=1))
            )
        late = _late_commit(harness.service, first.id, first.fencing_token, staging)
        (refused if late.returncode == 1 else accepted).append(
            f"lease-expired: {late.returncode} {late.stderr.strip()}"
        )
        if "lease expired" not in late.stderr:
            problems.append(f"unclear refusal: {late.stderr!r}")

        # ... and after its lost grace the reconciler declares it lost: the task gets a new attempt
        with harness.service.db.session() as session:
            attempt_event(
                session, first.id, AttemptState.LOST, f"fault-test-lost:{first.id}",
                reason="not seen for the lost grace (fault test)", actor="reconciler",
                fencing_token=first.fencing_token,
            )  # fmt: skip

        def second_running() -> bool:
            task = next(t for t in harness.service.status(job).tasks if t.name == "0")
            return len(task.attempts) == 2 and task.attempts[-1].state == AttemptState.RUNNING

        harness.run_until(second_running, 90)
        late = _late_commit(harness.service, first.id, first.fencing_token, staging)
        (refused if late.returncode == 1 else accepted).append(
            f"superseded: {late.returncode} {late.stderr.strip()}"
        )
        if "no longer its task's current attempt" not in late.stderr:
            problems.append(f"unclear refusal: {late.stderr!r}")
        wrong = _late_commit(harness.service, first.id, first.fencing_token + 7, staging)
        (refused if wrong.returncode == 1 else accepted).append(
            f"wrong token: {wrong.returncode} {wrong.stderr.strip()}"
        )

        harness.run_until(harness.all_finished([job]), 90)
        assert harness.state(job) == JobState.SUCCEEDED
        # the job manifest is written and staging collected in the period that saw it finish
        harness.run_until(lambda: (output / "_manifest.json").exists() and not staging.exists(), 30)
        problems += output_problems(harness.service, job, 2)
        manifest = {p["name"]: p["attempt"] for p in _outputs(job)}
        task0 = next(t for t in harness.service.status(job).tasks if t.name == "0")
        if manifest["0"] != task0.attempts[-1].id or manifest["0"] == first.id:
            problems.append(f"partition 0 is committed by {manifest['0']}, not its final attempt")
    violations = invariant_violations(harness.service)
    report(
        "late-partition",
        trials=len(refused) + len(accepted),
        refused=len(refused),
        accepted=len(accepted),
        violations=len(violations),
        output_problems=len(problems),
        wall_s=time.monotonic() - started,
    )
    print("\n".join(f"  {line}" for line in refused + accepted))
    assert accepted == []
    assert problems == []
    assert violations == []


def _outputs(job: str) -> list[dict]:
    from tests.faults.support import outputs_of

    return outputs_of(job)["partitions"]


def test_partitions_with_kills_scancels_and_stale_commits(
    slurm_exclusive: None, pg_service: Service, tmp_path: Path
) -> None:
    partitions = trials(8, 16)
    kills = trials(2, 6)
    cancels = trials(3, 8)
    seed = seed_of("partitions")
    rng = random.Random(seed)
    output = tmp_path / "out"
    # a partition writes two files (one of them sized by its index), sleeps, and half of them
    # commit themselves; the rest are auto-committed by the daemon when they exit 0
    command = (
        WRITE + 'head -c $((1000 + METASCHED_PARTITION * 100)) /dev/zero | tr "\\0" "$METASCHED_PARTITION" '
        '> "$METASCHED_OUTPUT_DIR/data.bin"\n'
        "sleep 4\n"
        "if [ $((METASCHED_PARTITION % 2)) = 1 ]; then metasched commit --json; fi\n"
    )
    daemon = ServeProcess(tmp_path, "parts-0")
    started = time.monotonic()
    scancelled: list[str] = []
    late_refused = late_accepted = 0
    try:
        # at most 4 partitions at a time: the job runs in waves, so kills and scancels land mid-run
        spec = dict(inference("parts", output, partitions, command), max_parallel=4)
        job = pg_service.submit(spec_from_dict(spec)).job.short_id
        output = output / job  # metasched writes staging and the manifest in the job's own folder
        since = daemon.start()
        wait_leading(pg_service, daemon, since)
        events = ["kill"] * kills + ["scancel"] * cancels
        rng.shuffle(events)
        for n, event in enumerate(events):
            time.sleep(rng.uniform(0.5, 2.5))
            if event == "kill":
                daemon.kill()
                daemon.holder = f"parts-{n + 1}"  # a new replica: waits out the lease, epoch + 1
                since = daemon.start()
                wait_leading(pg_service, daemon, since)
                continue

            def running() -> list:
                return [
                    a
                    for a in attempts_of(pg_service, job)
                    if a.state == AttemptState.RUNNING and a.slurm_job_id
                ]

            try:  # a scancel needs a running partition: wait a little for one
                wait_for(lambda: bool(running()), 10, "a running partition")
            except AssertionError:
                continue
            candidates = running()
            if candidates:
                victim = rng.choice(candidates)
                # as SlurmUser: a cancel metasched cannot attribute to a person (root's or the
                # owner's would be a cancel of the whole job, issue 13)
                subprocess.run(["runuser", "-u", "slurm", "--", "scancel", victim.slurm_job_id], capture_output=True,
                               timeout=30)  # fmt: skip
                scancelled.append(victim.id)
        wait_jobs(pg_service, [job], 300, [daemon])
        ended = [
            f"{t.name}: {a.number} {a.state} {a.reason}"
            for t in pg_service.status(job).tasks
            for a in t.attempts
        ]
        assert pg_service.status(job).state == JobState.SUCCEEDED, ended
        wait_for(lambda: (output / "_manifest.json").exists(), 30, "the job manifest")
        # the staging left now is what garbage collection kept
        leftover = (
            sorted(p.name for p in (output / "_attempts").iterdir())
            if (output / "_attempts").is_dir()
            else []
        )
        # every superseded attempt's worker now tries to commit what it wrote (a copy outside the
        # output dir: GC already removed its staging, and a late worker must not recreate it there)
        tasks = pg_service.status(job).tasks
        for task in tasks:
            for stale in task.attempts[:-1]:
                copy = tmp_path / "stale" / stale.id
                copy.mkdir(parents=True, exist_ok=True)
                (copy / "part.txt").write_text(f"partition {task.name} attempt {stale.id} (late)\n")
                late = _late_commit(pg_service, stale.id, stale.fencing_token, copy)
                if late.returncode == 1:
                    late_refused += 1
                else:
                    late_accepted += 1
        problems = output_problems(pg_service, job, partitions)
        attempts = attempts_of(pg_service, job)
        ids = {a.id for a in attempts}
        per_attempt = slurm_jobs_of(ids)
        violations = invariant_violations(pg_service)
        state = pg_service.status(job).state
        committed = {p["attempt"] for p in _outputs(job)}
    finally:
        daemon.kill()
        cancel_daemon_jobs()

    retried = sum(1 for t in tasks if len(t.attempts) > 1)
    report(
        "partitions",
        seed=seed,
        trials=len(events),
        partitions=partitions,
        kills=kills,
        scancelled=len(scancelled),
        scancelled_lost=sum(
            1 for t in tasks for a in t.attempts if a.id in scancelled and a.state == AttemptState.LOST
        ),
        tasks_retried=retried,
        attempts=len(ids),
        late_commits_refused=late_refused,
        late_commits_accepted=late_accepted,
        visible_outputs=len(committed - {None}),
        violations=len(violations),
        output_problems=len(problems),
        duplicates=duplicates(per_attempt),
        wall_s=time.monotonic() - started,
    )
    assert state == JobState.SUCCEEDED
    assert problems == []
    assert violations == []
    assert late_accepted == 0
    assert len(committed - {None}) == partitions
    # a scancelled attempt (cancelled in Slurm behind the daemon's back, by nobody metasched can
    # name) is lost and its task retried — never given up; a scancel after the job ended changed nothing
    for attempt_id in scancelled:
        task = next(t for t in tasks if any(a.id == attempt_id for a in t.attempts))
        victim = next(a for a in task.attempts if a.id == attempt_id)
        assert victim.state in (AttemptState.LOST, AttemptState.SUCCEEDED), (victim.state, victim.reason)
        if victim.state == AttemptState.LOST:
            assert task.attempts[-1].id != attempt_id and task.attempts[-1].state == AttemptState.SUCCEEDED
    # staging left behind is exactly the committed outputs' (the rest was garbage-collected)
    assert set(leftover) == committed
    assert duplicates(per_attempt) == 0
