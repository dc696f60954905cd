"""Clock skew between the heads (issue 25): one ``metasched serve`` replica runs with its wall clock 30 s off.

Two replicas on the real dev cluster and PostgreSQL, lease 6 s, period 1 s (as the network
scenarios). One of them runs under libfaketime (``LD_PRELOAD`` of ``libfaketime.so.1``,
``FAKETIME=+30s`` or ``-30s``, the monotonic clock left true), so everything in it that reads the
wall clock (Python's ``time.time()``, ``datetime.now()``, the Slurm commands it runs) is 30 s
ahead or behind; the other replica, PostgreSQL and this test keep the host's clock. The lease
must judge expiry by the store's clock, never a replica's:

1. the true-clock replica leads, the skewed one stands by for two lease lengths while jobs run:
   the lease keeps its holder and epoch (a standby running ahead saw it as long expired and took
   it in its first period before issue 25's fix);
2. the leader is killed (SIGKILL): the skewed replica takes over with epoch + 1 within lease +
   2 periods of the kill, to its first committed cycle (one running behind waited 30 s more);
3. the killed replica comes back as a standby and the skewed one leads, two lease lengths again:
   no change of epoch (a standby saw a leader running behind as expired);
4. the skewed leader is killed: the other takes over within the same bound (a lease written by
   a leader running ahead looked 30 s longer).

So exactly one change of epoch per kill, none otherwise (counted from a trigger on the lease row
that stamps every change with PostgreSQL's clock), every job runs once (one attempt, one Slurm
job), I1–I6 hold, nothing is left unsettled, and PostgreSQL accepted no row of an old epoch.
That the skew is real is asserted, not assumed: a probe of ``time.time()`` under the same
environment, the library mapped into the replica, and the replica's own cycle rows dated 30 s
off the server's clock. Debian 12's libfaketime breaks Python's ``time.sleep`` in this mode
(see ``SLEEP_SHIM``); where it does, the skewed replica's ``time.sleep`` waits in ``select()``.
"""

# ruff: noqa: B023 - the predicates defined in loops are polled at once, inside their iteration

from __future__ import annotations

import glob
import os
import subprocess
import sys
import time
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import func, select, text

from meta.model.spec import spec_from_dict
from meta.model.states import JobState
from meta.service.api import Service
from meta.store.db import Database
from meta.store.models import CycleRecord
from tests.cluster_gate import cluster_required
from tests.faults.site import FENCE_AUDIT_SQL, fence_violations, lease_changes
from tests.faults.support import report, small_eval
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

LEASE_S = 6.0
PERIOD_S = 1.0  # as the network scenarios: the first period of a new leader (sinfo, squeue) fits in it
BOUND_S = LEASE_S + 2 * PERIOD_S  # kill → the new epoch holds the lease: what the lease's clock decides
# kill → the new leader's first committed cycle may take longer: a replica's first period as leader
# reads the switch tree, QOS and account shares (scontrol, sacctmgr), seconds when slurmdbd is busy
# (10.4 s once, 5.9–7.0 s otherwise); the 30 s a skewed clock cost before the fix is far beyond it
CYCLE_BOUND_S = BOUND_S + 5.0
WATCH_S = 2 * LEASE_S  # how long a healthy leader must keep its lease beside a skewed replica
LIBFAKETIME = ("/usr/lib/x86_64-linux-gnu/faketime/libfaketime.so.1", "/usr/lib/*/faketime/libfaketime.so.1",
               "/usr/lib/faketime/libfaketime.so.1", "/usr/local/lib/faketime/libfaketime.so.1")  # fmt: skip
DROP_AUDIT_SQL = """
DROP TRIGGER IF EXISTS net_fence_attempts ON attempts;
DROP TRIGGER IF EXISTS net_fence_cycles ON cycles;
DROP TRIGGER IF EXISTS net_fence_decisions ON decisions;
DROP TRIGGER IF EXISTS net_lease_epochs ON leader_lease;
DROP FUNCTION IF EXISTS net_fence_check();
DROP FUNCTION IF EXISTS net_lease_change();
DROP TABLE IF EXISTS net_fence_audit, net_lease_log;
"""


def libfaketime() -> str:
    """libfaketime is the path of libfaketime.so.1 (Debian's package ``faketime``); skips, or fails in CI, without it."""
    for pattern in LIBFAKETIME:
        found = sorted(glob.glob(pattern))
        if found:
            return found[0]
    message = "libfaketime is not installed: apt-get install -y faketime (deploy/run-tests installs it)"
    if cluster_required():
        pytest.fail(message, pytrace=False)
    pytest.skip(message)


# libfaketime 0.9.10 (Debian 12's) with FAKETIME_DONT_FAKE_MONOTONIC hands the kernel a negative time
# for clock_nanosleep(CLOCK_MONOTONIC, TIMER_ABSTIME) (wolfcw/libfaketime#426), which is how Python
# 3.11's time.sleep sleeps: it fails with EINVAL. Where the probe finds that, the skewed replica's
# time.sleep waits in select() instead (a relative timeout, which libfaketime passes through);
# its clocks are libfaketime's either way. Faking the monotonic clock too is no way out: Python's
# lock timeouts (sem_clockwait) would then wait 30 s too long, or not at all.
SLEEP_SHIM = """import select
import time


def _sleep(seconds):
    if seconds < 0:
        raise ValueError("sleep length must be non-negative")
    select.select([], [], [], seconds)


time.sleep = _sleep
"""


def skewed_env(library: str, skew_s: float, shim_dir: Path) -> dict[str, str]:
    """skewed_env runs a process with its wall clock ``skew_s`` off (the monotonic clock left true)."""
    env = {"LD_PRELOAD": library, "FAKETIME": f"{skew_s:+g}s", "FAKETIME_DONT_FAKE_MONOTONIC": "1"}
    if not _sleeps(env):
        shim_dir.mkdir(parents=True, exist_ok=True)
        (shim_dir / "sitecustomize.py").write_text(SLEEP_SHIM)
        env["PYTHONPATH"] = os.pathsep.join(filter(None, [str(shim_dir), os.environ.get("PYTHONPATH")]))
        assert _sleeps(env), "time.sleep fails under libfaketime even with the select() shim"
    return env


def _sleeps(env: dict[str, str]) -> bool:
    """_sleeps tells whether time.sleep works in a Python child under ``env``."""
    done = subprocess.run([sys.executable, "-c", "import time; time.sleep(0.01)"],
                          env=dict(os.environ, **env), capture_output=True, timeout=30)  # fmt: skip
    return done.returncode == 0


def probe_offset(env: dict[str, str]) -> float:
    """probe_offset is how far Python's time.time() runs off in a child under ``env`` (0 if libfaketime did nothing)."""
    before = time.time()
    done = subprocess.run([sys.executable, "-c", "import time; print(repr(time.time()))"],
                          env=dict(os.environ, **env), capture_output=True, text=True, timeout=30, check=True)  # fmt: skip
    after = time.time()
    return float(done.stdout.strip()) - (before + after) / 2


def assert_preloaded(replica: ServeProcess, library: str) -> None:
    """assert_preloaded checks that libfaketime is mapped into the replica's process."""
    assert replica.proc is not None
    maps = Path(f"/proc/{replica.proc.pid}/maps")
    wait_for(lambda: library in maps.read_text(), 10, f"{library} in {maps}", poll_s=0.05)


def server_now(db: Database) -> datetime:
    """server_now is PostgreSQL's clock (the host's: this test runs unskewed on the same machine)."""
    with db.engine.connect() as connection:
        return connection.execute(text("SELECT clock_timestamp()")).scalar_one()


def watch_lease(service: Service, holder: str, epoch: int, seconds: float) -> list[tuple[str, int]]:
    """watch_lease samples the lease row for ``seconds`` and returns every (holder, epoch) seen other than the expected one."""
    strange: list[tuple[str, int]] = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        row = lease(service)
        seen = (row.holder, row.epoch) if row else ("", 0)
        if seen != (holder, epoch) and seen not in strange:
            strange.append(seen)
        time.sleep(0.05)
    return strange


def wait_standing_by(replica: ServeProcess) -> None:
    """wait_standing_by waits until a replica runs its periods (its start-up line), then a few periods more."""
    wait_for(lambda: replica.alive() and "serving as" in replica.log_text(), 30, f"{replica.holder} to serve")
    time.sleep(4 * PERIOD_S)


class Replica(ServeProcess):
    """Replica is a ``metasched serve`` replica of this scenario: ServeProcess's, with the scenario's period."""

    def argv(self) -> list[str]:
        """argv is ServeProcess's command line with ``--period`` set to PERIOD_S."""
        argv = super().argv()
        argv[argv.index("--period") + 1] = f"{PERIOD_S:g}"
        return argv


class Failover:
    """Failover is one kill of the leader and what the other replica did after it (times from the kill)."""

    def __init__(self, service: Service, killed: ServeProcess, successor: ServeProcess):
        row = lease(service)
        assert row is not None and row.holder == killed.holder, f"{killed.holder} should lead, lease: {row}"
        self.old_epoch = row.epoch
        self.killed_at = server_now(service.db)
        started = time.monotonic()
        killed.kill()
        limit = BOUND_S + 60  # long enough to measure a failover that misses the bound, and say by how much

        def taken() -> bool:
            now = lease(service)
            assert successor.alive(), f"{successor.holder} died:\n{successor.tail()}"
            return now is not None and now.epoch > self.old_epoch

        wait_for(taken, limit, f"{successor.holder} to take over from epoch {self.old_epoch}", poll_s=0.05)
        self.takeover_s = time.monotonic() - started
        row = lease(service)
        assert row is not None
        self.holder, self.epoch = row.holder, row.epoch

        def cycled() -> bool:
            with service.db.session() as session:
                return bool(session.scalar(select(func.count()).where(CycleRecord.epoch == self.epoch)))

        wait_for(cycled, limit, f"a cycle under epoch {self.epoch}", poll_s=0.05)
        self.failover_s = time.monotonic() - started
        seen_at = server_now(service.db)
        with service.db.session() as session:
            first = session.scalar(select(func.min(CycleRecord.at)).where(CycleRecord.epoch == self.epoch))
        assert first is not None
        # the successor's own clock, as it dated its first cycle, against the server's when it was seen
        self.writer_offset_s = (first - seen_at).total_seconds()


@pytest.mark.parametrize("skew_s", [30.0, -30.0], ids=["ahead", "behind"])
def test_a_skewed_head_neither_takes_nor_holds_back_the_lease(
    slurm_exclusive: None, pg_service: Service, tmp_path: Path, skew_s: float
) -> None:
    library = libfaketime()
    env = skewed_env(library, skew_s, tmp_path / "sleep-shim")
    offset = probe_offset(env)
    assert abs(offset - skew_s) < 2, (
        f"libfaketime did not move time.time() by {skew_s:+g} s in a child: {offset:+.2f} s"
    )
    db = pg_service.db
    with db.engine.begin() as connection:  # every change of epoch, and any stale row, by PostgreSQL's clock
        connection.execute(text(FENCE_AUDIT_SQL))
        connection.execute(text("TRUNCATE net_fence_audit, net_lease_log"))
    healthy = Replica(tmp_path, "healthy", lease_s=LEASE_S)
    skewed = Replica(tmp_path, "skewed", lease_s=LEASE_S, env=env)
    jobs: list[str] = []
    started = time.monotonic()

    def submit(n: int, tag: str) -> None:
        for i in range(n):
            spec = small_eval(f"skew-{tag}-{i}", ("tenant-a", "tenant-b")[i % 2], "sleep 1")
            jobs.append(pg_service.submit(spec_from_dict(spec)).job.short_id)

    try:
        since = healthy.start()
        wait_leading(pg_service, healthy, since)
        skewed.start()
        assert_preloaded(skewed, library)
        wait_standing_by(skewed)
        submit(3, "first")
        # 1. a healthy leader beside a skewed standby keeps its lease
        stolen_from_healthy = watch_lease(pg_service, "healthy", 1, WATCH_S)
        assert stolen_from_healthy == [], f"the lease changed hands with nobody down: {stolen_from_healthy}"
        # 2. the healthy leader dies: the skewed standby takes over in time
        first = Failover(pg_service, healthy, skewed)
        submit(3, "second")
        assert (first.holder, first.epoch) == ("skewed", 2)
        # the skewed replica really runs skewed: it dates its own cycle rows that far off the server's clock
        assert abs(first.writer_offset_s - skew_s) < 3, (
            f"the skewed leader's rows are dated {first.writer_offset_s:+.1f} s off the server's clock"
        )
        assert first.takeover_s <= BOUND_S, (
            f"the lease went to the skewed replica {first.takeover_s:.2f} s after the kill > "
            f"lease + 2 periods = {BOUND_S:g} s"
        )
        assert first.failover_s <= CYCLE_BOUND_S, (
            f"the skewed replica's first cycle came {first.failover_s:.2f} s after the kill > {CYCLE_BOUND_S:g} s"
        )
        # 3. the healthy replica back as a standby beside the skewed leader
        healthy.start()
        wait_standing_by(healthy)
        stolen_from_skewed = watch_lease(pg_service, "skewed", 2, WATCH_S)
        assert stolen_from_skewed == [], (
            f"the lease changed hands with nobody down: {stolen_from_skewed} (the first failover took "
            f"{first.failover_s:.2f} s)"
        )
        # 4. the skewed leader dies: the healthy standby takes over in time
        second = Failover(pg_service, skewed, healthy)
        assert (second.holder, second.epoch) == ("healthy", 3)
        assert second.takeover_s <= BOUND_S, (
            f"the lease went from the skewed replica {second.takeover_s:.2f} s after the kill > "
            f"lease + 2 periods = {BOUND_S:g} s"
        )
        assert second.failover_s <= CYCLE_BOUND_S, (
            f"the first cycle after the skewed leader's kill came {second.failover_s:.2f} s after it > "
            f"{CYCLE_BOUND_S:g} s"
        )
        submit(3, "third")
        wait_jobs(pg_service, jobs, 240, [healthy])
        attempts = {job: attempts_of(pg_service, job) for job in jobs}
        ids = {a.id for group in attempts.values() for a in group}
        per_attempt = slurm_jobs_of(ids)
        violations = invariant_violations(pg_service)
        unsettled = unsettled_attempts(pg_service)
        changes = [(c.holder, c.epoch) for c in lease_changes(db) if c.epoch > 0]
        stale = fence_violations(db)
        states = {job: pg_service.status(job).state for job in jobs}
    finally:
        healthy.kill()
        skewed.kill()
        cancel_daemon_jobs()
        with db.engine.begin() as connection:
            connection.execute(text(DROP_AUDIT_SQL))

    lost = sum(1 for state in states.values() if state != JobState.SUCCEEDED)
    report(
        "clock_skew",
        skew_s=skew_s,
        probe_offset_s=round(offset, 2),
        sleep_shim="PYTHONPATH" in env,
        skewed_writer_offset_s=round(first.writer_offset_s, 2),
        epochs=len(changes),
        epoch_changes=" ".join(f"{h}:{e}" for h, e in changes),
        takeover_s=[first.takeover_s, second.takeover_s],
        failover_s=[first.failover_s, second.failover_s],
        failovers=f"{first.failover_s:.2f}/{second.failover_s:.2f}",
        bound_s=BOUND_S,
        cycle_bound_s=CYCLE_BOUND_S,
        jobs=len(jobs),
        attempts=len(ids),
        lost=lost,
        duplicated=duplicates(per_attempt),
        violations=len(violations) + len(stale),
        stale_writes=len(stale),
        wall_s=time.monotonic() - started,
    )
    assert changes == [("healthy", 1), ("skewed", 2), ("healthy", 3)], (
        f"one change of epoch per kill: {changes}"
    )
    assert stale == []
    assert violations == []
    assert unsettled == []
    assert lost == 0, {job: state.value for job, state in states.items() if state != JobState.SUCCEEDED}
    assert all(len(group) == 1 for group in attempts.values()), "a job ran more than once"
    assert duplicates(per_attempt) == 0
    assert set(per_attempt) == ids
