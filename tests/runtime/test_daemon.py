"""Daemon.period end to end over FakeSlurm: jobs run to completion, submit faults never duplicate, I5 holds."""

from __future__ import annotations

import json
import threading
from collections import defaultdict
from datetime import timedelta
from pathlib import Path

import pytest
from sqlalchemy import func, select

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig, PeriodReport
from meta.cycle.invariants import (
    check_i2_slurm_matches_attempts,
    check_i3_tokens_increase,
    check_i5_capacity,
    check_invariants,
)
from meta.cycle.lease import LEASE_NAME, Leadership, try_acquire
from meta.cycle.reconcile import ReconcileSettings
from meta.model.durations import utcnow
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState, JobState
from meta.service.api import Service
from meta.store.models import Attempt, LeaderLease, Task
from slurm_bridge import tags
from slurm_bridge.errors import SlurmTransient
from slurm_bridge.fake import (
    REJECTED,
    TRANSIENT,
    UNKNOWN_AFTER,
    UNKNOWN_BEFORE,
    FakeSlurm,
    small_cluster,
)
from slurm_bridge.inventory import build_inventory
from tests.runtime.support import checkpointing, evaluation, inference, settled, training

LIVE = [s.value for s in LIVE_ATTEMPT_STATES]
TRANSIENT_ERROR = SlurmTransient("slurmctld not responding")


def _daemon(service: Service, fake: FakeSlurm, tmp_path: Path, **reconcile: float) -> Daemon:
    config = DaemonConfig(
        period_s=0.0,
        leader_lease_s=60.0,
        holder="unit-daemon",
        # a fake sbatch cannot land after its call returned: the look-up window need not outlast it
        submit_timeout_s=0.0,
        launch=LaunchSettings(log_dir=str(tmp_path / "logs"), grace_s=30),
        reconcile=ReconcileSettings(
            unknown_window_s=reconcile.get("unknown_window_s", 0.0),
            lost_grace_s=reconcile.get("lost_grace_s", 600.0),
        ),
    )
    return Daemon(service.db, fake, config)


def _i5(service: Service, fake: FakeSlurm) -> list[str]:
    """_i5 checks reserved ≤ allocatable per node, by the invariant checker and by hand."""
    nodes = build_inventory(fake.sinfo()).nodes
    capacity = {n.name: n.capacity for n in nodes}
    used: dict[str, list[float]] = defaultdict(lambda: [0.0, 0.0, 0.0])
    with service.db.session() as session:
        problems = check_i5_capacity(session, nodes)
        for placement in session.scalars(select(Attempt.placement).where(Attempt.state.in_(LIVE))):
            for share in placement:
                totals = used[share["node"]]
                totals[0] += share["cpus"]
                totals[1] += share["memory_mib"]
                totals[2] += share["gpus"]
    for node, (cpus, mem, gpus) in used.items():
        cap = capacity[node]
        if cpus > cap.cpus or mem > cap.memory_mib or gpus > cap.gpus:
            problems.append(f"{node}: {cpus} cpus, {mem} MiB, {gpus} GPUs > {cap}")
    return problems


def _invariants(service: Service, fake: FakeSlurm) -> list[str]:
    """_invariants runs I1–I6 with what the fake Slurm shows."""
    active = {job.key for job in fake.active_jobs()}
    with service.db.session() as session:
        return check_invariants(session, slurm_active_names=active, nodes=build_inventory(fake.sinfo()).nodes)


def _run(service: Service, daemon: Daemon, fake: FakeSlurm, jobs: list[str], periods: int = 60) -> int:
    """_run runs periods (Slurm advancing between them) until every job ended; checks I5 each time."""
    for n in range(1, periods + 1):
        report = settled(daemon)
        assert report.error == "", f"period {n}: {report.error}"
        assert report.leader
        assert _i5(service, fake) == [], f"I5 violated after period {n}"
        assert _invariants(service, fake) == [], f"invariants violated after period {n}"
        fake.advance()
        if all(service.status(job).state in {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED} for job in jobs):
            return n
    raise AssertionError(f"jobs not done after {periods} periods: {[service.status(j).state for j in jobs]}")


def _attempts(service: Service) -> list[Attempt]:
    with service.db.session() as session:
        return list(session.scalars(select(Attempt)))


def test_jobs_of_every_kind_run_to_success(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    daemon = _daemon(service, fake, tmp_path)
    out = tmp_path / "out"
    jobs = [
        service.submit(training("gang", workers=2, resources={"cpus": 8, "memory": "64G", "gpus": 8, "gpu_type": "a100"})).job.id,
        service.submit(inference(str(out), partitions=4, max_parallel=2)).job.id,
        service.submit(evaluation()).job.id,
        *(service.submit(training(f"t{i}", resources={"cpus": 8, "memory": "32G", "gpus": 4, "gpu_type": "a100"})).job.id for i in range(6)),
    ]
    _run(service, daemon, fake, jobs)
    assert [service.status(job).state for job in jobs] == [JobState.SUCCEEDED] * len(jobs)
    attempts = _attempts(service)
    assert all(a.state == AttemptState.SUCCEEDED.value for a in attempts)
    assert len(fake.jobs) == len(attempts)  # one Slurm job per attempt, no extra
    assert all(len(fake.jobs_for(a.id)) == 1 and a.slurm_job_id == str(fake.job_of(a.id).job_id) for a in attempts)
    gang = next(a for a in attempts if a.job_id == jobs[0])
    assert sorted(fake.job_of(gang.id).nodes) == sorted(gang.nodes()) and len(set(gang.nodes())) == 2
    settled(daemon)  # the job manifest is written off the period that saw the job end: picked up in the next
    manifest = json.loads((out / service.status(jobs[1]).summary.short_id / "_manifest.json").read_text())
    assert manifest["complete"] is True and len(manifest["partitions"]) == 4
    with service.db.session() as session:
        assert check_i3_tokens_increase(session) == []


def test_a_failing_job_retries_and_then_succeeds(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    daemon = _daemon(service, fake, tmp_path)
    failed_once: set[str] = set()

    def outcome(job):
        if job.attempt_id not in failed_once and not failed_once:
            failed_once.add(job.attempt_id)
            return "NODE_FAIL", 0
        return "COMPLETED", 0

    fake.outcome = outcome
    job = service.submit(training(retry={"backoff": 0})).job.id
    _run(service, daemon, fake, [job])
    assert service.status(job).state == JobState.SUCCEEDED
    attempts = sorted(_attempts(service), key=lambda a: a.number)
    assert [(a.state, a.failure_category) for a in attempts] == [("failed", "node_failure"), ("succeeded", None)]
    assert attempts[0].fencing_token < attempts[1].fencing_token
    assert set(attempts[0].nodes()).isdisjoint(attempts[1].nodes())  # the failed node is avoided


@pytest.mark.parametrize(
    "faults",
    [
        [UNKNOWN_BEFORE] * 3,
        [UNKNOWN_AFTER] * 3,
        [UNKNOWN_BEFORE, UNKNOWN_AFTER, TRANSIENT, UNKNOWN_AFTER, UNKNOWN_BEFORE, UNKNOWN_BEFORE],
    ],
    ids=["before-acceptance", "after-acceptance", "mixed"],
)
def test_submit_faults_never_duplicate_and_every_job_succeeds(
    service: Service, tmp_path: Path, faults: list[str]
) -> None:
    fake = FakeSlurm()
    daemon = _daemon(service, fake, tmp_path)
    fake.fail_next_submits(*faults)
    jobs = [service.submit(training(f"t{i}", resources={"cpus": 8, "memory": "32G", "gpus": 4, "gpu_type": "a100"})).job.id for i in range(5)]
    jobs.append(service.submit(inference(str(tmp_path / "out"), partitions=3)).job.id)
    _run(service, daemon, fake, jobs)
    assert [service.status(job).state for job in jobs] == [JobState.SUCCEEDED] * len(jobs)
    attempts = _attempts(service)
    assert len(attempts) == 5 + 3  # an unknown outcome is looked up, never replaced by a new attempt
    for a in attempts:
        assert a.state == AttemptState.SUCCEEDED.value
        (job,) = fake.jobs_for(a.id)  # exactly one Slurm job per attempt
        assert a.slurm_job_id == str(job.job_id) and job.state == "COMPLETED"
    assert not fake.submit_faults  # every fault was exercised


def test_rejected_submit_retries_with_a_new_attempt(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    daemon = _daemon(service, fake, tmp_path)
    fake.fail_next_submits(REJECTED)
    job = service.submit(training(retry={"backoff": 0})).job.id
    _run(service, daemon, fake, [job])
    attempts = sorted(_attempts(service), key=lambda a: a.number)
    assert [(a.state, a.failure_category) for a in attempts] == [("failed", "launch_failure"), ("succeeded", None)]
    assert len(fake.jobs) == 1


def test_orphans_and_slurm_state_agree_after_the_run(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    daemon = _daemon(service, fake, tmp_path)
    stray = fake.add_job("stray", tags.comment(daemon.site, "00000000-dead-beef-0000-000000000000"))  # this site's
    job = service.submit(evaluation()).job.id
    _run(service, daemon, fake, [job])
    assert stray.state == "CANCELLED"
    active = {j.name for j in fake.active_jobs()}
    with service.db.session() as session:
        assert check_i2_slurm_matches_attempts(session, active, utcnow(), 120) == []


def test_cancel_reaches_slurm_and_ends_the_job(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    fake.run_ticks = 1000  # runs until cancelled
    daemon = _daemon(service, fake, tmp_path)
    job = service.submit(training()).job.id
    for _ in range(3):
        assert settled(daemon).error == ""
        fake.advance()
    (attempt,) = _attempts(service)
    assert attempt.state == AttemptState.RUNNING.value
    service.cancel(job)
    _run(service, daemon, fake, [job])
    assert service.status(job).state == JobState.CANCELLED
    assert fake.job_of(attempt.id).state == "CANCELLED"
    assert (str(fake.job_of(attempt.id).job_id), None) in fake.cancels


def test_drained_node_is_evicted_and_its_work_moves(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    fake.run_ticks = 4
    daemon = _daemon(service, fake, tmp_path)
    job = service.submit(checkpointing(ckpt_dir=str(tmp_path / "ckpt"), retry={"backoff": 0})).job.id
    for _ in range(2):
        assert settled(daemon).error == ""
        fake.advance()
    (first,) = _attempts(service)
    assert first.state == AttemptState.RUNNING.value
    (bad,) = set(first.nodes())
    fake.set_node(bad, "IDLE", ["DRAIN"])

    def checkpoint_and_exit_on_usr1():
        for j in fake.active_jobs():
            if "USR1" in j.signals:
                fake.finish(j.job_id, "COMPLETED", 0)  # wrote its checkpoint and exited

    for _ in range(40):
        assert settled(daemon).error == ""
        checkpoint_and_exit_on_usr1()
        fake.advance()
        if service.status(job).state == JobState.SUCCEEDED:
            break
    attempts = sorted(_attempts(service), key=lambda a: a.number)
    assert attempts[0].state == AttemptState.PREEMPTED.value and attempts[0].stop_reason == "preempt"
    assert attempts[-1].state == AttemptState.SUCCEEDED.value
    assert all(bad not in a.nodes() for a in attempts[1:])
    with service.db.session() as session:
        assert bad in session.get(Task, first.task_id).avoid_nodes
    assert service.status(job).state == JobState.SUCCEEDED


def test_preemption_for_a_training_gang_keeps_i5_and_everything_finishes(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    fake.run_ticks = 6
    daemon = _daemon(service, fake, tmp_path)
    whole_node = {"cpus": 8, "memory": "32G", "gpus": 8, "gpu_type": "a100"}
    evals = [service.submit(evaluation(f"e{i}", resources=whole_node)).job.id for i in range(4)]
    for _ in range(3):
        assert settled(daemon).error == ""
        fake.advance()
    assert len(fake.active_jobs()) == 4
    gang = service.submit(training("gang", workers=2, resources=whole_node)).job.id
    _run(service, daemon, fake, [gang, *evals], periods=120)
    assert [service.status(j).state for j in [gang, *evals]] == [JobState.SUCCEEDED] * 5
    attempts = _attempts(service)
    preempted = [a for a in attempts if a.state == AttemptState.PREEMPTED.value]
    assert preempted, "the gang should have preempted evaluations"
    assert all(a.stop_reason == "preempt" and fake.job_of(a.id).state == "CANCELLED" for a in preempted)
    assert all(len(fake.jobs_for(a.id)) == 1 for a in attempts)


def test_one_task_preempts_only_as_much_as_it_needs(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm(small_cluster(2))
    fake.run_ticks = 1000  # the victims checkpoint during their grace; they never end on their own
    daemon = _daemon(service, fake, tmp_path)
    node = {"cpus": 8, "memory": "32G", "gpus": 8, "gpu_type": "a100"}
    for i in range(2):
        service.submit(checkpointing(f"low{i}", ckpt_dir=str(tmp_path / f"c{i}"), resources=node, priority_class="evaluation"))
    for _ in range(3):
        assert settled(daemon).error == ""
        fake.advance()
    assert [a.state for a in _attempts(service)] == ["running", "running"]
    service.submit(training("high", resources=node))
    for _ in range(4):  # well within the 30 s grace: the first victim is still stopping
        assert settled(daemon).error == ""
        assert _i5(service, fake) == []
        fake.advance()
    stopping = [a for a in _attempts(service) if a.state == AttemptState.STOPPING.value]
    assert len(stopping) == 1, "one 8-GPU task needs exactly one 8-GPU victim"


def _failed_period(daemon: Daemon, fake: FakeSlurm, fault: str) -> PeriodReport:
    """_failed_period runs one period with a Slurm read failing (``fault`` of FakeSlurm), then heals it."""
    setattr(fake, fault, TRANSIENT_ERROR)
    report = settled(daemon)
    setattr(fake, fault, None)
    assert report.error.startswith("slurm:"), report
    return report


def test_unreadable_squeue_ends_the_period_without_scheduling(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    daemon = _daemon(service, fake, tmp_path)
    job = service.submit(evaluation()).job.id
    report = _failed_period(daemon, fake, "squeue_fault")
    assert report.placed == 0 and _attempts(service) == [] and fake.calls["submit"] == 0
    _run(service, daemon, fake, [job])
    assert service.status(job).state == JobState.SUCCEEDED


def test_sacct_is_read_only_when_squeue_misses_a_live_attempt(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    daemon = _daemon(service, fake, tmp_path)
    job = service.submit(evaluation()).job.id
    assert settled(daemon).error == ""  # placed and launched
    fake.advance()
    calls = fake.calls["sacct"]
    report = settled(daemon)  # the job is in squeue: accounting has nothing to add
    assert report.error == "" and fake.calls["sacct"] == calls and report.slurm_reads == 2  # sinfo + squeue
    (attempt,) = _attempts(service)
    slurm_job = fake.job_of(attempt.id)
    fake.finish(slurm_job.job_id)
    slurm_job.in_squeue = False  # aged out of squeue (MinJobAge): only slurmdbd still knows it
    _failed_period(daemon, fake, "sacct_fault")
    assert fake.calls["sacct"] == calls + 1
    assert service.status(job).state != JobState.SUCCEEDED  # nothing concluded from a failed read
    _run(service, daemon, fake, [job])
    assert service.status(job).state == JobState.SUCCEEDED


def test_a_standby_replica_does_nothing(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    leader = _daemon(service, fake, tmp_path)
    standby = Daemon(service.db, fake, DaemonConfig(period_s=0.0, holder="standby", launch=LaunchSettings(log_dir=str(tmp_path / "l2"))))
    assert settled(leader).leader
    service.submit(evaluation())
    submits = fake.calls["submit"]
    report = settled(standby)
    assert report.leader is False and report.placed == 0 and report.error == ""
    assert _attempts(service) == [] and fake.calls["submit"] == submits
    assert fake.calls["squeue"] == 1  # only the leader read Slurm


def test_failover_to_a_new_leader_finishes_the_work_without_duplicates(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    fake.run_ticks = 3
    first = _daemon(service, fake, tmp_path)
    jobs = [service.submit(training(f"t{i}")).job.id for i in range(3)]
    for _ in range(2):
        assert settled(first).error == ""
        fake.advance()
    with service.db.session() as session:  # the first replica freezes past its lease
        session.get(LeaderLease, LEASE_NAME).expires_at = utcnow() - timedelta(seconds=1)
    second = Daemon(service.db, fake, DaemonConfig(period_s=0.0, holder="second", submit_timeout_s=0.0, launch=LaunchSettings(log_dir=str(tmp_path / "l2")), reconcile=ReconcileSettings(unknown_window_s=0.0)))
    _run(service, second, fake, jobs)
    assert second.leadership is not None and second.leadership.epoch == 2
    stale = settled(first)  # the old leader wakes up: it finds the lease taken and writes nothing
    assert stale.leader is False
    attempts = _attempts(service)
    assert len(attempts) == 3 and all(len(fake.jobs_for(a.id)) == 1 for a in attempts)


@pytest.mark.parametrize("fault", [UNKNOWN_BEFORE, UNKNOWN_AFTER])
def test_cancel_during_an_unknown_launch_leaves_no_slurm_job_running(
    service: Service, tmp_path: Path, fault: str
) -> None:
    fake = FakeSlurm()
    fake.run_ticks = 1000
    daemon = _daemon(service, fake, tmp_path, unknown_window_s=0.0)
    fake.fail_next_submits(fault)
    job = service.submit(training()).job.id
    assert settled(daemon).error == ""
    (attempt,) = _attempts(service)
    assert attempt.state == AttemptState.LAUNCH_UNKNOWN.value
    service.cancel(job)
    _run(service, daemon, fake, [job])
    assert service.status(job).state == JobState.CANCELLED
    assert fake.active_jobs() == []
    assert len(fake.jobs_for(attempt.id)) == (1 if fault == UNKNOWN_AFTER else 0)


def test_run_until_idle_finishes_the_work_and_releases_leadership(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    fake.auto_advance = True
    daemon = _daemon(service, fake, tmp_path)
    jobs = [service.submit(evaluation(f"e{i}")).job.id for i in range(3)]
    jobs.append(service.submit(inference(str(tmp_path / "out"), partitions=2)).job.id)
    daemon.run(threading.Event(), exit_when_idle=True)
    assert [service.status(job).state for job in jobs] == [JobState.SUCCEEDED] * 4
    assert try_acquire(service.db, "next-replica", 30) == Leadership("next-replica", 2)  # released at exit


def test_run_stops_when_asked(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    daemon = _daemon(service, fake, tmp_path)
    stop = threading.Event()
    stop.set()
    daemon.run(stop)
    assert fake.calls["squeue"] == 0 and daemon.leadership is None


def test_inference_never_exceeds_max_parallel(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    fake.run_ticks = 2
    daemon = _daemon(service, fake, tmp_path)
    job = service.submit(inference(str(tmp_path / "out"), partitions=7, max_parallel=2)).job.id
    peak = 0
    for _ in range(60):
        assert settled(daemon).error == ""
        with service.db.session() as session:
            live = session.scalar(
                select(func.count()).select_from(Attempt).where(Attempt.job_id == job, Attempt.state.in_(LIVE))
            )
        peak = max(peak, live)
        assert live <= 2
        fake.advance()
        if service.status(job).state == JobState.SUCCEEDED:
            break
    assert service.status(job).state == JobState.SUCCEEDED and peak == 2


def test_a_drained_node_gets_no_work(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    fake.set_node("node1", "IDLE", ["DRAIN"])
    fake.set_node("node2", "DOWN")
    daemon = _daemon(service, fake, tmp_path)
    jobs = [service.submit(evaluation(f"e{i}", resources={"cpus": 4, "memory": "16G", "gpus": 4, "gpu_type": "a100"})).job.id for i in range(6)]
    _run(service, daemon, fake, jobs)
    used = {node for a in _attempts(service) for node in a.nodes()}
    assert used and used <= {"node3", "node4"}


def test_a_failed_job_retried_by_the_user_runs_again(service: Service, tmp_path: Path) -> None:
    fake = FakeSlurm()
    fake.outcome = lambda job: ("FAILED", 3) if len(fake.jobs) == 1 else ("COMPLETED", 0)
    daemon = _daemon(service, fake, tmp_path)
    job = service.submit(training()).job.id
    _run(service, daemon, fake, [job])
    assert service.status(job).state == JobState.FAILED
    service.retry(job)
    _run(service, daemon, fake, [job])
    assert service.status(job).state == JobState.SUCCEEDED
    attempts = sorted(_attempts(service), key=lambda a: a.number)
    assert [(a.state, a.exit_code, a.fencing_token) for a in attempts] == [("failed", 3, 1), ("succeeded", 0, 2)]
