"""Network faults on a site of several hosts (issue 25): partitions, loss and delay between real hosts' stacks.

Needs ``deploy/site up`` (network namespaces ms-head1, ms-head2, ms-db, ms-login on a bridge;
PostgreSQL inside ms-db; the dev cluster's slurmctld and slurmds in the root namespace) and
skips with the reason otherwise, unless ``METASCHED_REQUIRE_SITE=1``. Not part of CI's default
run: ``deploy/site up && deploy/fault-suite -k network``.

Two ``metasched serve`` replicas run in ms-head1 and ms-head2 against the site's store, their
APIs on 10.77.0.11/12:9465, which is also what their jobs call (``--job-api``). alice submits
from the login host with the installed thin CLI over TCP (MUNGE), so jobs run as alice on the
real Slurm. The faults (``tests/faults/network.py``) are nftables drops, ``numgen`` loss and a
per-packet delay inside the namespaces, healed in the ``network`` fixture's finally.

(a) the leader cut from PostgreSQL (both ways, or one way either way) while jobs run: the standby
    takes over within lease + 2 periods of the cut (to the new leader's first committed cycle),
    PostgreSQL accepts no row of the old epoch once the new one leads (the fence audit's
    triggers), the old leader rejoins as a standby after the heal.
(b) the leader cut from the controller (slurmctld and slurmdbd) but not from PostgreSQL, with
    launches in flight: the sbatch calls the cut caught become unknown outcomes, looked up and
    launched once (here by the standby: the leader's period blocks on Slurm past its lease).
(c) 30% loss each way and 500 ms delay on the leader's link: every job completes under the
    fault; leadership may move to the healthy replica, fenced.
(d) the login host cut from the API: the CLI fails in one line with exit 1 and nothing is
    stored; after the heal the same ``--key`` makes the job once, and again returns it; with
    only the answers cut, the job is stored once and the repeat returns it.
(e) the compute side cut from the API: a partition ending in ``metasched commit`` fails (the
    user retries it after the heal); one that lets the commit fail exits 0 and is committed by
    the daemon.
(f) the standby cut from the leader: nothing changes.

Every scenario: every job ends exactly once, one Slurm job per attempt, at most one live attempt
per task, one output per inference partition, I1–I6, nothing unsettled, an empty fence audit.
"""

# ruff: noqa: B023 - the predicates defined in loops are polled at once, inside their iteration

from __future__ import annotations

import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select

from meta.model.states import JobState
from meta.service import artifacts
from meta.service.api import Service
from meta.store.db import Database
from meta.store.models import Attempt, CycleRecord, Job, Transition
from tests.faults.network import Network, reachable, wait_until
from tests.faults.site import (
    HeadServe,
    client_sessions,
    fence_violations,
    head_address,
    head_api,
    lease_changes,
    live_attempts_per_task,
    login,
    network,
    remove_folder,
    require_site,
    rows_after,
    server_now,
    site_database,
    site_service,
    submit_as,
    user_folder,
)
from tests.faults.support import inference, output_problems, report, small_eval
from tests.harness import (
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

__all__ = ["network", "site_database", "site_service"]  # fixtures, used by name

pytestmark = [pytest.mark.slurm, pytest.mark.network]

HEADS = ("ms-head1", "ms-head2")
LEASE_S = 6.0
PERIOD_S = 1.0
FAILOVER_BOUND_S = LEASE_S + 2 * PERIOD_S
JOBS_TIMEOUT_S = 300.0
USER = "alice"
TENANT = "tenant-a"
WRITE = 'echo "partition $METASCHED_PARTITION attempt $METASCHED_ATTEMPT_ID" > "$METASCHED_OUTPUT_DIR/part.txt"; sleep 2'


@pytest.fixture(scope="module", autouse=True)
def site_gate() -> None:
    """site_gate skips the module (or fails it, when required) before any fixture takes the Slurm lock."""
    require_site()


@dataclass
class Work:
    """Work is what one scenario submitted from the login host: job ids by key, and inference jobs' partitions."""

    folder: Path
    jobs: dict[str, str] = field(default_factory=dict)  # key -> job id
    partitions: dict[str, int] = field(default_factory=dict)  # inference job id -> partitions
    cli_failures: int = 0  # submits that failed and were sent again with the same key

    def submit(self, api: str, spec: dict[str, object], key: str, tries: int = 1) -> str:
        """submit sends one job as alice from the login host, again with the same key if it failed (bounded)."""
        for _ in range(tries):
            outcome, job = submit_as(USER, api, self.folder, spec, key)
            if job is not None:
                self.jobs[key] = job
                if spec["kind"] == "inference":
                    self.partitions[job] = int(spec["partitions"])  # type: ignore[call-overload]
                return job
            self.cli_failures += 1
        raise AssertionError(f"submit {key} to {api} failed {tries} time(s): {outcome.stderr.strip()}")

    def evals(self, api: str, tag: str, n: int, seconds: int = 3, tries: int = 1) -> None:
        """evals submits ``n`` small evaluation jobs that sleep ``seconds``."""
        for i in range(n):
            self.submit(api, small_eval(f"net-{tag}-{i}", TENANT, f"sleep {seconds}"), f"{tag}-{i}", tries)

    def inference(self, api: str, tag: str, partitions: int, tries: int = 1) -> None:
        """inference submits one inference job writing one file per partition under the folder."""
        spec = inference(f"net-{tag}", self.folder / f"out-{tag}", partitions, WRITE, tenant=TENANT)
        self.submit(api, spec, tag, tries)


@pytest.fixture
def work() -> Iterator[Work]:
    """work is a fresh folder of alice's for one scenario's job files and outputs."""
    folder = user_folder(USER)
    try:
        yield Work(folder)
    finally:
        remove_folder(folder)


@dataclass
class Replicas:
    """Replicas are the two heads' ``metasched serve`` processes."""

    by_ns: dict[str, HeadServe]

    def start(self, service: Service, first: str = "ms-head1") -> None:
        """start runs ``first`` until it leads, then the other; both APIs answering from the login host."""
        since = self.by_ns[first].start()
        wait_leading(service, self.by_ns[first], since)
        for ns, replica in self.by_ns.items():
            if ns != first:
                replica.start()
        for ns in self.by_ns:
            wait_for(lambda: reachable("ms-login", head_address(ns), 9465), 30, f"the API of {ns} from ms-login")

    def leader(self, service: Service) -> tuple[HeadServe, HeadServe, int]:
        """leader is (leader, standby, epoch) from the lease row."""
        row = lease(service)
        assert row is not None and row.holder in self.by_ns, row
        leader = self.by_ns[row.holder]
        return leader, next(r for r in self.by_ns.values() if r is not leader), row.epoch

    def stop(self) -> None:
        """stop kills both replicas (SIGKILL, after SIGCONT)."""
        for replica in self.by_ns.values():
            replica.kill()

    def tails(self) -> str:
        """tails is the end of each replica's log."""
        return "\n".join(f"--- {ns}\n{r.tail(30)}" for ns, r in self.by_ns.items())


@pytest.fixture
def replicas(slurm_exclusive: None, site_service: Service, tmp_path: Path) -> Iterator[Replicas]:
    """replicas are two serve replicas in the heads (lease 6 s, period 1 s), killed at the end with their jobs."""
    pair = Replicas({ns: HeadServe(tmp_path, ns, lease_s=LEASE_S, period_s=PERIOD_S) for ns in HEADS})
    try:
        yield pair
    finally:
        pair.stop()
        cancel_daemon_jobs()


# --- the checks every scenario makes ---------------------------------------------------------


def outputs_reader(service: Service):  # noqa: ANN201 - a small closure for output_problems
    """outputs_reader reads a job's manifest straight from the store (what ``metasched outputs`` shows)."""

    def read(job: str) -> dict[str, object]:
        """read is the job's manifest from the store."""
        with service.db.session() as session:
            return artifacts.outputs(session, job)

    return read


def settle(service: Service, database: Database, work: Work, replicas: Replicas) -> dict[str, object]:
    """settle waits for every job to end and counts what was lost, duplicated or broken (empty lists: none)."""
    wait_jobs(service, list(work.jobs.values()), JOBS_TIMEOUT_S, replicas.by_ns.values())
    states = {job: service.status(job).state for job in work.jobs.values()}
    attempts = {job: attempts_of(service, job) for job in work.jobs.values()}
    ids = {a.id for group in attempts.values() for a in group}
    per_attempt = slurm_jobs_of(ids)
    with service.db.session() as session:
        keyed = session.scalar(select(func.count()).select_from(Job).where(Job.idempotency_key.is_not(None)))
    tasks_succeeded_twice = 0
    for job in work.jobs.values():
        for task in service.status(job).tasks:
            tasks_succeeded_twice += max(0, sum(1 for a in task.attempts if a.state == "succeeded") - 1)
    problems = [p for job, n in work.partitions.items() for p in output_problems(service, job, n, outputs_reader(service))]
    tasks = sum(len(service.status(job).tasks) for job in work.jobs.values())
    return {
        "jobs": len(work.jobs),
        "lost": sum(1 for s in states.values() if s != JobState.SUCCEEDED),
        # a job stored twice for one submit, a second Slurm job of an attempt, a task done twice, an extra output
        "duplicated": max(0, keyed - len(work.jobs)) + duplicates(per_attempt) + tasks_succeeded_twice + len(problems),
        "retries": len(ids) - tasks,
        "unlaunched": len(ids - set(per_attempt)),
        "violations": invariant_violations(service),
        "unsettled": unsettled_attempts(service),
        "fence_violations": fence_violations(database),
        "output_problems": problems,
    }


def assert_clean(counts: dict[str, object]) -> None:
    """assert_clean: nothing lost or duplicated, I1–I6 hold, nothing unsettled, no stale write accepted."""
    assert counts["lost"] == 0, counts
    assert counts["duplicated"] == 0, counts
    assert counts["violations"] == [], counts
    assert counts["unsettled"] == [], counts
    assert counts["fence_violations"] == [], counts
    assert counts["output_problems"] == [], counts


def figures(counts: dict[str, object]) -> dict[str, object]:
    """figures are the counts as report() takes them (lists become their length)."""
    return {k: len(v) if isinstance(v, list) else v for k, v in counts.items()}


class TimedCall:
    """TimedCall runs one ``metasched list`` as the user against an API in the background and records how it went."""

    def __init__(self, api: str, folder: Path) -> None:
        self.outcome: dict[str, object] = {}
        self._thread = threading.Thread(target=self._call, args=(api, folder), daemon=True)
        self._thread.start()

    def _call(self, api: str, folder: Path) -> None:
        started = time.monotonic()
        outcome = login(USER, api, folder, "list", "--json", timeout_s=150)
        self.outcome.update(s=time.monotonic() - started, code=outcome.code, error=outcome.stderr.strip()[:160])

    def join(self, timeout_s: float) -> dict[str, object]:
        """join waits for the call (at most ``timeout_s``) and returns what it recorded (empty if unfinished)."""
        self._thread.join(timeout_s)
        return self.outcome


def running_attempts(service: Service, n: int) -> bool:
    """running_attempts tells whether at least ``n`` attempts run in Slurm."""
    with service.db.session() as session:
        return (session.scalar(select(func.count()).select_from(Attempt).where(Attempt.state == "running")) or 0) >= n


def first_cycle_of(service: Service, epoch: int) -> datetime | None:
    """first_cycle_of is when the first cycle of ``epoch`` was committed (None: none yet)."""
    with service.db.session() as session:
        return session.scalar(select(func.min(CycleRecord.at)).where(CycleRecord.epoch == epoch))


# --- (a) the leader cut from PostgreSQL ------------------------------------------------------


PG_CUTS = {
    "both": lambda net, leader: net.cut(leader, "ms-db"),
    # the leader's packets to PostgreSQL are lost; PostgreSQL's to the leader arrive
    "to-db": lambda net, leader: net.cut(leader, "ms-db", one_way=True),
    # PostgreSQL's answers to the leader are lost; the leader's requests arrive
    "from-db": lambda net, leader: net.cut("ms-db", leader, one_way=True),
}


@pytest.mark.parametrize("direction", list(PG_CUTS))
def test_leader_partitioned_from_postgres(
    replicas: Replicas, site_service: Service, site_database: Database, network: Network, work: Work, direction: str
) -> None:
    """the leader cut from PostgreSQL: the standby leads within lease + 2 periods, the old epoch writes nothing, nothing lost or doubled."""
    service, database = site_service, site_database
    replicas.start(service)
    leader, standby, old_epoch = replicas.leader(service)
    work.evals(head_api(leader.ns), "a-warm", 4, seconds=6)
    work.inference(head_api(leader.ns), "a-infer", 4)
    wait_for(lambda: running_attempts(service, 3), 60, "the first jobs to run")
    row = lease(service)
    assert row is not None and row.epoch == old_epoch
    last_expiry = row.expires_at

    cut_at = time.monotonic()
    PG_CUTS[direction](network, leader.ns)
    # what a user whose API address is the cut head sees: one call, timed (it ends after the heal, or times out)
    prober = TimedCall(head_api(leader.ns), work.folder)
    # the login host goes on through the healthy head: every replica serves the API
    work.evals(head_api(standby.ns), "a-during", 3, seconds=2)

    takeover_s = failover_s = None
    most_live = 0
    new_epoch = None
    deadline = cut_at + 60
    while time.monotonic() < deadline:
        now = lease(service)
        if now is not None and now.epoch == old_epoch:
            last_expiry = max(last_expiry, now.expires_at)  # a renewal that got through just before the cut
        if now is not None and now.epoch > old_epoch and takeover_s is None:
            assert now.holder == standby.holder, f"{now.holder} took epoch {now.epoch}"
            takeover_s, new_epoch = time.monotonic() - cut_at, now.epoch
        if new_epoch is not None and first_cycle_of(service, new_epoch) is not None:
            failover_s = time.monotonic() - cut_at
            break
        most_live = max(most_live, live_attempts_per_task(database))
        time.sleep(0.1)
    assert failover_s is not None, f"no cycle of a new epoch within 60 s of the cut\n{replicas.tails()}"

    # the cut holds a while longer: the new leader works, the old one is stuck on its store
    hold_until = time.monotonic() + 10
    while time.monotonic() < hold_until:
        most_live = max(most_live, live_attempts_per_task(database))
        time.sleep(0.25)
    assert leader.alive(), leader.tail()

    healed_wall = server_now(database)
    network.heal()
    rejoined = wait_until(lambda: client_sessions(database, head_address(leader.ns), healed_wall) > 0, 180, 0.25)
    after = lease(service)
    assert after is not None and after.holder == standby.holder and after.epoch == new_epoch, after
    assert leader.alive(), f"the old leader died instead of rejoining as a standby:\n{leader.tail()}"

    probe = prober.join(160)
    counts = settle(service, database, work, replicas)
    stale = rows_after(database, old_epoch, last_expiry)
    epochs = [c for c in lease_changes(database) if c.epoch > 0]  # the first row is the empty lease
    report(
        f"network-pg-partition-{direction}",
        trials=1,
        lease_s=LEASE_S,
        period_s=PERIOD_S,
        bound_s=FAILOVER_BOUND_S,
        takeover_s=round(takeover_s or 0, 2),
        failover_s=round(failover_s, 2),
        rejoin_after_heal_s=None if rejoined is None else round(rejoined, 2),
        cut_head_api_call_s=round(float(probe.get("s", -1)), 1),  # type: ignore[arg-type]
        cut_head_api_call_exit=probe.get("code"),
        cut_head_api_error=probe.get("error") or None,
        stale_rows=sum(stale.values()),
        max_live_attempts_per_task=most_live,
        epochs=len(epochs),
        leaders=">".join(c.holder for c in epochs),
        wall_s=round(time.monotonic() - cut_at, 1),
        **figures(counts),
    )
    assert_clean(counts)
    assert stale == {"attempts": 0, "cycles": 0}, f"epoch {old_epoch} wrote after its lease lapsed at {last_expiry}: {stale}"
    assert most_live <= 1
    assert rejoined is not None, f"the old leader never talked to the store again after the heal\n{leader.tail()}"
    assert failover_s <= FAILOVER_BOUND_S, f"failover {failover_s:.2f}s > lease + 2 periods ({FAILOVER_BOUND_S:g}s)"


# --- (b) the leader cut from the controller ---------------------------------------------------

SBATCH_WAIT_S = 5
SLURM_COMMANDS = ("sacct", "sacctmgr", "scancel", "scontrol", "sdiag", "sinfo", "squeue")


def slow_sbatch_bin(folder: Path, wait_s: int) -> Path:
    """slow_sbatch_bin is a Slurm bin folder whose sbatch waits ``wait_s`` before the real one; the rest are the real ones."""
    folder.mkdir(parents=True, exist_ok=True)
    sbatch = folder / "sbatch"
    sbatch.write_text(f'#!/bin/sh\n# a slow controller: the request leaves {wait_s} s late\nsleep {wait_s}\nexec /usr/bin/sbatch "$@"\n')
    sbatch.chmod(0o755)
    for name in SLURM_COMMANDS:
        link = folder / name
        if not link.exists():
            link.symlink_to(f"/usr/bin/{name}")
    return folder


def test_leader_partitioned_from_controller(
    slurm_exclusive: None, site_service: Service, site_database: Database, network: Network, work: Work, tmp_path: Path
) -> None:
    """the leader cut from slurmctld with launches in flight: unknown outcomes looked up, each job launched once."""
    service, database = site_service, site_database
    # every sbatch waits 5 s before it reaches slurmctld: the cut lands on calls in flight (a user's sbatch gets a
    # login-like environment, so fakebin's METASCHED_FAKE_SBATCH_DELAY cannot reach it; the wait is in the wrapper)
    bin_dir = slow_sbatch_bin(tmp_path / "bin", SBATCH_WAIT_S)
    pair = Replicas({ns: HeadServe(tmp_path, ns, lease_s=LEASE_S, period_s=PERIOD_S) for ns in HEADS})
    for replica in pair.by_ns.values():
        replica.extra = ["--slurm-bin-dir", str(bin_dir)]
    try:
        pair.start(service)
        leader, _standby, epoch = pair.leader(service)
        work.evals(head_api(leader.ns), "b-warm", 2, seconds=2)
        wait_for(lambda: running_attempts(service, 1), 60, "a first job to run")
        with service.db.session() as session:
            before = set(session.scalars(select(Attempt.id)))
        assert before, "the warm-up placed nothing"
        work.evals(head_api(leader.ns), "b-cut", 4, seconds=2)

        def launching() -> bool:
            """launching tells whether an attempt of the new jobs is between its launching commit and its Slurm id."""
            with service.db.session() as session:
                return bool(session.scalar(select(func.count()).select_from(Attempt).where(
                    Attempt.state == "launching", Attempt.id.not_in(before))))  # fmt: skip

        wait_for(launching, 60, "a launch of the new jobs", poll_s=0.05)
        cut_at = time.monotonic()
        cut_server = server_now(database)
        network.cut(leader.ns, "controller")
        time.sleep(25)  # longer than the submit timeout (10 s): every sbatch the cut caught has given up
        with service.db.session() as session:
            unknown = session.scalar(select(func.count()).select_from(Attempt).where(Attempt.state == "launch_unknown"))
        network.heal()
        healed = time.monotonic()

        def all_started() -> bool:
            """all_started tells whether every job caught by the cut runs or ran."""
            return all(
                any(a.state in ("running", "succeeded") for a in attempts_of(service, job))
                for key, job in work.jobs.items() if key.startswith("b-cut")
            )

        recovered = wait_until(all_started, 120, 0.25)
        counts = settle(service, database, work, pair)
        with service.db.session() as session:
            went_unknown = session.scalar(select(func.count(func.distinct(Transition.entity_id))).where(
                Transition.entity == "attempt", Transition.to_state == "launch_unknown"))  # fmt: skip
        takeovers = [c for c in lease_changes(database) if c.epoch > epoch]
        logs = {ns: r.log_text() for ns, r in pair.by_ns.items()}
    finally:
        pair.stop()
        cancel_daemon_jobs()
    unknown_logged = sum(text.count("has an unknown outcome") for text in logs.values())
    report(
        "network-controller-partition",
        trials=1,
        cut_s=round(healed - cut_at, 1),
        lease_moved=bool(takeovers),
        takeover_after_cut_s=round((takeovers[0].at - cut_server).total_seconds(), 2) if takeovers else None,
        launch_unknown_during_cut=unknown,
        attempts_through_unknown=went_unknown,
        unknown_outcomes_logged=unknown_logged,
        recover_after_heal_s=None if recovered is None else round(recovered, 2),
        **figures(counts),
    )
    assert_clean(counts)
    assert went_unknown >= 1, "no launch was caught by the cut: the scenario tested nothing"
    assert recovered is not None, "the jobs caught by the cut did not start within 120 s of the heal"


# --- (c) loss and delay on the leader's link -------------------------------------------------


def test_lossy_slow_leader_link(
    replicas: Replicas, site_service: Service, site_database: Database, network: Network, work: Work
) -> None:
    """30% loss each way and 500 ms delay on the leader's link: every job completes, nothing doubled."""
    service, database = site_service, site_database
    replicas.start(service)
    leader, standby, epoch = replicas.leader(service)
    network.loss(leader.ns, 30, both_ways=True)  # 30% each way: harsher than netem's egress-only loss
    network.delay(leader.ns, 500)  # egress: every round trip of the leader gains 500 ms
    faulted = time.monotonic()
    # the users submit through the healthy head (every replica serves the API); a failed submit goes again with its key
    work.evals(head_api(standby.ns), "c", 6, seconds=3, tries=2)
    work.inference(head_api(standby.ns), "c-infer", 3, tries=2)
    submitted_s = time.monotonic() - faulted
    # meanwhile, what a user whose API address is the degraded head sees: one call, timed
    prober = TimedCall(head_api(leader.ns), work.folder)
    most_live = 0

    def done() -> bool:
        """done tells whether every job ended (sampling the live attempts per task on the way)."""
        nonlocal most_live
        most_live = max(most_live, live_attempts_per_task(database))
        states = [service.status(job).state for job in work.jobs.values()]
        return all(s in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED) for s in states)

    completed = wait_until(done, 240, 0.5)  # under the faults
    probe = prober.join(160)
    network.heal()
    counts = settle(service, database, work, replicas)
    epochs = [c for c in lease_changes(database) if c.epoch > 0]  # the first row is the empty lease
    report(
        "network-loss-delay",
        trials=1,
        loss_pct=30,
        delay_ms=500,
        degraded_api_call_s=round(float(probe.get("s", -1)), 1),  # type: ignore[arg-type]
        degraded_api_call_exit=probe.get("code"),
        degraded_api_error=probe.get("error") or None,
        submit_all_s=round(submitted_s, 1),
        complete_under_fault_s=None if completed is None else round(completed + submitted_s, 1),
        epochs=len(epochs),
        leaders=">".join(c.holder for c in epochs),
        first_epoch=epoch,
        max_live_attempts_per_task=most_live,
        cli_failures=work.cli_failures,
        **figures(counts),
    )
    assert_clean(counts)
    assert most_live <= 1
    assert completed is not None, f"the jobs did not complete under loss and delay\n{replicas.tails()}"


# --- (d) the login host cut from the API -----------------------------------------------------


def test_login_cut_from_api(
    replicas: Replicas, site_service: Service, site_database: Database, network: Network, work: Work
) -> None:
    """the login host cut from the API: one-line error, nothing stored; the same --key afterwards makes one job."""
    service, database = site_service, site_database
    replicas.start(service)
    api = head_api("ms-head1")
    spec = small_eval("net-d", TENANT, "sleep 1")

    # 1. the login host cut from ms-head1 both ways: nothing reaches the API
    network.cut("ms-login", "ms-head1")
    started = time.monotonic()
    failed, job = submit_as(USER, api, work.folder, spec, "d-key")
    failed_s = time.monotonic() - started
    stored = keyed(service, "d-key")
    # the other head still answers the login host: every replica serves the API
    other, other_job = submit_as(USER, head_api("ms-head2"), work.folder, small_eval("net-d2", TENANT, "sleep 1"), "d-other")
    network.heal()
    first, first_id = submit_as(USER, api, work.folder, spec, "d-key")
    again, again_id = submit_as(USER, api, work.folder, spec, "d-key")

    # 2. only the answers lost: the request arrives and is stored, the CLI hears nothing back
    lost_spec = small_eval("net-d3", TENANT, "sleep 1")
    network.cut("ms-head1", "ms-login", one_way=True, data_only=True)
    started = time.monotonic()
    unanswered, unanswered_job = submit_as(USER, api, work.folder, lost_spec, "d-lost", timeout_s=180)
    unanswered_s = time.monotonic() - started
    stored_unanswered = keyed(service, "d-lost")
    network.heal()
    retried, retried_id = submit_as(USER, api, work.folder, lost_spec, "d-lost")

    for key, found in (("d-key", first_id), ("d-other", other_job), ("d-lost", retried_id)):
        if found:
            work.jobs[key] = found
    counts = settle(service, database, work, replicas)
    report(
        "network-login-cut",
        trials=1,
        cli_exit=failed.code,
        cli_error_lines=failed.stderr.count("\n"),
        cli_error=failed.stderr.strip()[:200],
        cli_fail_s=round(failed_s, 1),
        stored_during_cut=stored,
        same_key_same_job=first_id is not None and first_id == again_id,
        unanswered_exit=unanswered.code,
        unanswered_error=unanswered.stderr.strip()[:200],
        unanswered_s=round(unanswered_s, 1),
        stored_unanswered=stored_unanswered,
        retry_same_job=retried_id is not None and stored_unanswered == 1 and keyed(service, "d-lost") == 1,
        **figures(counts),
    )
    assert failed.code == 1 and job is None, failed
    assert failed.stderr.count("\n") == 1 and "cannot reach the metasched API" in failed.stderr, failed.stderr
    assert "Traceback" not in failed.stderr + unanswered.stderr
    assert stored == 0, "a submit that never reached the API stored a job"
    assert other.code == 0, other.stderr
    assert first.code == 0 and again.code == 0, (first, again)
    assert first_id == again_id, "the same --key made two jobs"
    assert unanswered.code == 1 and unanswered_job is None and unanswered.stderr.count("\n") == 1, unanswered
    assert "may have been done" in unanswered.stderr and "same --key" in unanswered.stderr, unanswered.stderr
    assert stored_unanswered == 1, "the request whose answer was lost did not arrive (the cut was not data-only)"
    assert retried.code == 0 and keyed(service, "d-lost") == 1, (retried, "the retry with the same --key made a second job")
    assert_clean(counts)


def keyed(service: Service, key: str) -> int:
    """keyed counts the stored jobs with an idempotency key."""
    with service.db.session() as session:
        return session.scalar(select(func.count()).select_from(Job).where(Job.idempotency_key == key)) or 0


# --- (e) a compute host cut from the API -----------------------------------------------------

WRITE_PART = 'echo "partition $METASCHED_PARTITION attempt $METASCHED_ATTEMPT_ID" > "$METASCHED_OUTPUT_DIR/part.txt"\n'
# the partition's exit status is its commit's: a commit that cannot get through fails the partition
STRICT = WRITE_PART + "metasched commit"
# a commit that cannot get through is left to the daemon: the partition exits 0, its staging is committed for it
TOLERANT = WRITE_PART + 'metasched commit || echo "commit did not get through: the daemon commits the staging"'


def test_compute_cut_from_api(
    replicas: Replicas, site_service: Service, site_database: Database, network: Network, work: Work
) -> None:
    """the nodes cut from the API: commits fail (retried by the user) or are left to the daemon; one output per partition."""
    service, database = site_service, site_database
    replicas.start(service)
    leader, _standby, epoch = replicas.leader(service)
    # the jobs call the API of the replica that launched them (--job-api): the leader's, cut from the nodes
    network.cut("compute", leader.ns)
    cut_at = time.monotonic()
    work.submit(head_api(leader.ns), inference("net-e", work.folder / "out-e", 3, STRICT, tenant=TENANT), "e-strict")
    work.submit(head_api(leader.ns), inference("net-e2", work.folder / "out-e2", 3, TOLERANT, tenant=TENANT), "e-tolerant")
    strict, tolerant = work.jobs["e-strict"], work.jobs["e-tolerant"]

    def strict_failed() -> bool:
        """strict_failed tells whether the strict job ended failed."""
        return service.status(strict).state == JobState.FAILED

    failed_after = wait_until(strict_failed, 120, 0.25)
    tolerant_done = wait_until(lambda: service.status(tolerant).state == JobState.SUCCEEDED, 60, 0.25)
    network.heal()
    healed = time.monotonic()
    failed_tasks = sum(1 for t in service.status(strict).tasks if t.state == "failed")
    # what the job printed when its commit could not get through (its Slurm output, in alice's folder)
    printed = [line for out in sorted(work.folder.glob("slurm-*.out")) for line in out.read_text(errors="replace").splitlines()
               if line.startswith("metasched:")]
    # alice retries the failed partitions once the network is back: only failed tasks get a new attempt
    retried = login(USER, head_api(leader.ns), work.folder, "retry", strict)
    counts = settle(service, database, work, replicas)
    held = lease(service)
    report(
        "network-compute-cut",
        trials=1,
        cut_s=round(healed - cut_at, 1),
        strict_failed_after_s=None if failed_after is None else round(failed_after, 1),
        strict_failed_partitions=failed_tasks,
        tolerant_succeeded_under_cut=tolerant_done is not None,
        job_saw=printed[0][:200] if printed else None,
        user_retry_exit=retried.code,
        lease_kept=held is not None and held.epoch == epoch,
        **figures(counts),
    )
    assert failed_after is not None, "the strict job's commits did not fail while the nodes could not reach the API"
    assert tolerant_done is not None, "the tolerant job's partitions were not committed by the daemon under the cut"
    assert retried.code == 0, retried.stderr
    assert_clean(counts)


# --- (f) the standby cut from the leader -----------------------------------------------------


def test_standby_cut_from_leader(
    replicas: Replicas, site_service: Service, site_database: Database, network: Network, work: Work
) -> None:
    """the standby cut from the leader: they meet only in the store, so nothing changes."""
    service, database = site_service, site_database
    replicas.start(service)
    leader, standby, epoch = replicas.leader(service)
    network.cut(standby.ns, leader.ns)  # they meet only in the store: nothing should change
    work.evals(head_api(standby.ns), "f", 4, seconds=2)
    work.evals(head_api(leader.ns), "f-leader", 2, seconds=2)
    time.sleep(15)
    network.heal()
    counts = settle(service, database, work, replicas)
    epochs = [c for c in lease_changes(database) if c.epoch > 0]
    report("network-standby-cut", trials=1, epochs=len(epochs), leaders=">".join(c.holder for c in epochs),
           **figures(counts))
    assert_clean(counts)
    assert [c.epoch for c in epochs] == [epoch], "the lease moved though both replicas reached the store"
