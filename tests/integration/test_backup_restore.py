"""An older backup of the store restored on the dev cluster: nothing it knows runs twice (issue 25).

A real ``metasched serve`` on PostgreSQL runs alice's and root's jobs on the dev cluster. While
it runs, ``metasched db backup`` takes a copy; then more happens that the copy will not know:
jobs that waited at the backup (their begin time) are launched, one of them ends, two new jobs
are submitted and run, a running job is cancelled. The daemon is stopped, the copy restored with
``metasched db restore`` into a new database, ``metasched db unknown-jobs --cancel`` run, and a
new ``metasched serve`` started on the restored store. Checked (docs/operations.md, "Backup and
restore", says the same):

- every attempt of either store has exactly one Slurm job (counted by the tag's attempt in sacct);
- jobs running at the backup are followed to their end by the restored store: the same attempt
  and Slurm job, no second one; the one cancelled after the backup ends cancelled (accounting
  says root cancelled it), not relaunched;
- jobs launched after the backup are listed by ``db restore`` (the copy lacks their attempts):
  the three whose task waits in the copy are cancelled by ``unknown-jobs --cancel`` before the new
  daemon starts, and each runs once more under the copy, never beside the cancelled one; the job
  whose post-backup run had already ended runs a second time (what a copy cannot know);
- jobs submitted after the backup are not in the copy: alice's runs on to its end untracked
  (the new daemon audits it once as ``job.tag.spoofed`` and leaves it), root's is cancelled by the
  new daemon as an orphan;
- I1–I6 hold on the restored store at the end.

The second test skips ``--cancel`` and shows why it is there: a job of alice launched after the
copy is left running (audited once as ``job.tag.spoofed``) while the copy runs its task again
beside it.
"""

from __future__ import annotations

import json
import os
import shutil
import signal
import subprocess
import sys
import time
import uuid
from collections import defaultdict
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime, timedelta
from pathlib import Path

import pytest
from sqlalchemy import select

from meta.cycle.invariants import check_invariants
from meta.model.durations import utcnow
from meta.model.errors import NotFound
from meta.model.spec import spec_from_dict
from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from meta.store.db import Database
from meta.store.models import Attempt, AuditEvent, Job
from meta.store.site import renew_site_id, stored_site_id
from slurm_bridge import tags
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.inventory import build_inventory
from tenants.identity import Principal
from tests.conftest import empty_pg_database, pg_url
from tests.harness import REPO, ServeProcess, wait_for, wait_jobs, wait_leading

pytestmark = pytest.mark.slurm

ALICE = Principal("alice", "tenant-a", uid=2001, gid=2001, accounts=frozenset({"tenant-a"}))
RUN_S = 50  # the jobs running at the backup outlive the whole gap: the restored daemon must follow them
BEGIN_S = 20  # the jobs waiting at the backup start this long after their submit, after the backup
WAIT_S = 25  # how long those run: still running when the copy is restored
FINAL = (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)


class Serve(ServeProcess):
    """Serve is ``ServeProcess`` on a store of its own (the source, then the restored copy), real Slurm commands."""

    def __init__(self, tmp_path: Path, holder: str, url: str) -> None:
        super().__init__(tmp_path, holder, bin_dir=None, extra=["--log-level", "INFO"])
        self.url = url

    def argv(self) -> list[str]:
        argv = super().argv()
        argv[argv.index("--db") + 1] = self.url
        return argv

    def stop(self) -> None:
        """stop ends the daemon as systemd would (SIGTERM), SIGKILL after 60 s."""
        if self.proc is not None and self.proc.poll() is None:
            self.signal(signal.SIGTERM)
            try:
                self.proc.wait(timeout=60)
            except subprocess.TimeoutExpired:
                self.kill()
        self.proc = None


def metasched(url: str, *args: str) -> dict[str, object]:
    """metasched runs the installed tree's CLI on a store and returns its --json answer."""
    done = subprocess.run([sys.executable, "-c", "from cli.main import main; main()", "--db", url, *args, "--json"],
                          cwd=REPO, capture_output=True, text=True, timeout=300)  # fmt: skip
    assert done.returncode == 0, f"metasched {' '.join(args)}: {done.stderr}"
    return json.loads(done.stdout)


def evaluation(name: str, command: str, begin: datetime | None = None, tenant: str = "tenant-a") -> dict[str, object]:
    """evaluation is a 1-CPU job that fits anywhere, starting no earlier than ``begin``."""
    spec: dict[str, object] = {"kind": "evaluation", "name": name, "tenant": tenant,
                               "resources": {"cpus": 1, "memory": "1G"}, "time_limit": "5m", "command": command}  # fmt: skip
    if begin is not None:
        spec["begin"] = begin.isoformat()
    return spec


@dataclass(frozen=True)
class SlurmRow:
    """SlurmRow is one job of this site as accounting has it."""

    job_id: str
    user: str
    state: str
    start: str
    end: str
    attempt: str


def site_jobs(site: str, since: datetime) -> list[SlurmRow]:
    """site_jobs are the Slurm jobs (all users) whose tag names ``site``, from sacct."""
    out = subprocess.run(["sacct", "-n", "-P", "-X", "-a", "-S", since.strftime("%Y-%m-%dT%H:%M:%S"),
                          "-o", "JobID,User,State,Start,End,Comment%200"],
                         capture_output=True, text=True, check=True, timeout=60, env={**os.environ, "TZ": "UTC"}).stdout  # fmt: skip
    rows = []
    for line in out.splitlines():
        parts = line.split("|", 5)
        if len(parts) != 6:
            continue
        tag = tags.parse_tag("", parts[5])
        if tag is not None and tag.site == site:
            rows.append(SlurmRow(parts[0], parts[1], parts[2].split()[0], parts[3], parts[4], tag.attempt_id))
    return rows


def active_names(site: str) -> set[str]:
    """active_names are the ``ms-<attempt>`` keys of this site's active Slurm jobs (I2's input)."""
    return {f"ms-{job.attempt}" for job in active_jobs(site)}


@dataclass(frozen=True)
class Active:
    job_id: str
    attempt: str


def active_jobs(site: str) -> list[Active]:
    """active_jobs are this site's jobs squeue shows pending or running."""
    out = subprocess.run(["squeue", "-h", "-t", "PD,R,CG,CF", "-o", "%i|%k"], capture_output=True, text=True,
                         check=True, timeout=60).stdout  # fmt: skip
    found = []
    for line in out.splitlines():
        job_id, _, comment = line.strip().partition("|")
        tag = tags.parse_tag("", comment)
        if tag is not None and tag.site == site:
            found.append(Active(job_id, tag.attempt_id))
    return found


def attempts(db: Database) -> dict[str, tuple[str, str, str, str | None]]:
    """attempts maps every attempt id of a store to (job short id, task id, state, Slurm job id)."""
    with db.session() as session:
        rows = session.execute(select(Attempt.id, Job.short_id, Attempt.task_id, Attempt.state, Attempt.slurm_job_id)
                               .join(Job, Job.id == Attempt.job_id))  # fmt: skip
        return {row.id: (row.short_id, row.task_id, row.state, row.slurm_job_id) for row in rows}


def job_attempts(db: Database, short_id: str) -> list[tuple[str, str, str | None]]:
    """job_attempts are (attempt id, state, Slurm id) of one job."""
    return [(a, state, slurm) for a, (job, _, state, slurm) in attempts(db).items() if job == short_id]


@pytest.fixture
def restore_url() -> Iterator[str]:
    """restore_url is a new, empty database beside the test's own (``<name>_restore``), dropped afterwards."""
    with empty_pg_database("restore") as url:
        yield url


@pytest.fixture
def alice_dir() -> Iterator[Path]:
    """alice_dir is a fresh folder in alice's home, made by alice: her jobs run and write there."""
    folder = Path("/home/alice") / f"ms-backup-{uuid.uuid4().hex[:8]}"
    subprocess.run(["runuser", "-u", "alice", "--", "mkdir", "-m", "0755", str(folder)], check=True, timeout=30)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def test_an_older_backup_restored_runs_nothing_it_knows_twice(
    slurm_exclusive: None, pg_service: Service, tmp_path: Path, restore_url: str, alice_dir: Path
) -> None:
    source = pg_service
    renew_site_id(source.db)  # a site of its own: Slurm still lists earlier runs' jobs for minutes
    began = utcnow() - timedelta(minutes=1)
    first = Serve(tmp_path, "backup-first", pg_url())
    second = Serve(tmp_path, "backup-restored", restore_url)
    restored_db = Database(restore_url)
    try:
        figures = _run(source, first, second, restored_db, tmp_path, alice_dir, began)
        print("\nBACKUP-RESTORE " + " ".join(f"{k}={v}" for k, v in figures.items()), flush=True)
    finally:
        _clean_up(source, first, second, restored_db)


def _clean_up(source: Service, first: Serve, second: Serve, restored_db: Database) -> None:
    """_clean_up stops both daemons and cancels whatever this site still runs in Slurm."""
    first.kill()
    second.kill()
    site = stored_site_id(source.db)
    ids = [job.job_id for job in active_jobs(site)] if site else []
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=30)
    restored_db.dispose()


def _run(source: Service, first: Serve, second: Serve, restored_db: Database, tmp_path: Path, alice_dir: Path,
         began: datetime) -> dict[str, object]:  # fmt: skip
    """_run is the scenario: jobs, a backup while serve runs, more work, a restore, the restored daemon."""
    t0 = time.monotonic()

    def submit(spec: dict[str, object], as_alice: bool = True) -> str:
        if as_alice:
            return source.submit(spec_from_dict(spec), principal=ALICE, submit_dir=str(alice_dir)).job.short_id
        return source.submit(spec_from_dict(spec)).job.short_id  # root's (the daemon's own user)

    begin = utcnow() + timedelta(seconds=BEGIN_S)
    running = [submit(evaluation(f"bk-run-{i}", f"sleep {RUN_S}")) for i in range(2)]
    cancelled_later = submit(evaluation("bk-run-cancelled", f"sleep {RUN_S}"))
    # still running when the copy is restored (the stop and the restore take a few seconds)
    waiting = [submit(evaluation(f"bk-wait-{i}", f"sleep {WAIT_S}", begin)) for i in range(2)]
    waiting.append(submit(evaluation("bk-wait-root", f"sleep {WAIT_S}", begin), as_alice=False))
    ends_before_restore = submit(evaluation("bk-wait-short", "sleep 1", begin))

    since = first.start()
    wait_leading(source, first, since)
    site = stored_site_id(source.db) or ""
    assert site

    def running_in(db: Database, jobs: list[str]) -> bool:
        assert first.alive(), first.tail()
        states = [state for job in jobs for _, state, _ in job_attempts(db, job)]
        return len(states) == len(jobs) and all(s == AttemptState.RUNNING.value for s in states)

    wait_for(lambda: running_in(source.db, [*running, cancelled_later]), 60, "the first jobs to run")
    backup = tmp_path / "store.dump"
    taken = metasched(pg_url(), "db", "backup", str(backup))
    assert utcnow() < begin, "the backup came after the waiting jobs' begin time: raise BEGIN_S"
    at_backup = {job: job_attempts(source.db, job) for job in [*running, cancelled_later]}

    # --- after the backup: what the copy will not know -------------------------------------------
    late = [submit(evaluation("bk-late-alice", "sleep 40")), submit(evaluation("bk-late-root", "sleep 40"), False)]
    source.cancel(cancelled_later)
    wait_for(lambda: running_in(source.db, [*waiting, *late]), 90, "the waiting and late jobs to run")
    wait_for(lambda: source.status(ends_before_restore).state == JobState.SUCCEEDED, 60, "the short job to end")
    wait_for(lambda: source.status(cancelled_later).state == JobState.CANCELLED, 60, "the cancel to take")
    first.stop()
    launched_after = {job: job_attempts(source.db, job)[-1] for job in [*waiting, *late]}

    # --- restore the older copy ------------------------------------------------------------------
    restore_url = second.url
    restored = metasched(restore_url, "db", "restore", str(backup))
    listed = {str(job["slurm_job_id"]): job for job in restored["unknown_jobs"]}  # type: ignore[union-attr]
    expect = {str(launched_after[job][2]): job for job in [*waiting, *late]}  # the short one already ended
    assert set(listed) == set(expect), (listed, expect)
    for slurm_id, job in expect.items():
        row = listed[slurm_id]
        assert row["job"] == job
        if job in waiting:
            assert row["in_store"] == "pending" and row["runs_again"], row
        else:
            assert row["in_store"] == "absent" and not row["runs_again"], row
    assert restored["site"] == site and restored["live_attempts"] == 3  # the copy's running jobs
    cancelling = time.monotonic()
    answer = metasched(restore_url, "db", "unknown-jobs", "--cancel")
    cancel_s = time.monotonic() - cancelling
    assert sorted(str(j["slurm_job_id"]) for j in answer["unknown_jobs"] if j["cancelled"]) == sorted(  # type: ignore[union-attr]
        str(launched_after[job][2]) for job in waiting)
    cancelled_at = utcnow()

    since = second.start()
    recovery_s = wait_leading(Service(restored_db), second, since)
    restored_service = Service(restored_db)
    mine = [*running, cancelled_later, *waiting, ends_before_restore]
    wait_jobs(restored_service, mine, 150, [second])
    late_ids = {job: str(launched_after[job][2]) for job in late}
    wait_for(lambda: not ({a.job_id for a in active_jobs(site)} & set(late_ids.values())), 90,
             "the jobs submitted after the backup to end")  # fmt: skip
    second.stop()

    # --- what each store and Slurm hold ----------------------------------------------------------
    per_attempt: dict[str, list[SlurmRow]] = defaultdict(list)
    everything = {**attempts(source.db), **attempts(restored_db)}

    def accounted() -> bool:
        per_attempt.clear()
        for row in site_jobs(site, began):
            per_attempt[row.attempt].append(row)
        return set(everything) <= set(per_attempt) and all(
            r.end not in ("", "Unknown") for rows in per_attempt.values() for r in rows)

    wait_for(accounted, 60, "accounting to record every job")
    assert {a: len(rows) for a, rows in per_attempt.items() if len(rows) != 1} == {}, "an attempt ran twice"
    assert set(per_attempt) == set(everything), "a Slurm job of this site belongs to no attempt of either store"

    def slurm_of(job: str) -> list[SlurmRow]:
        return sorted((r for a, (j, _, _, _) in everything.items() if j == job for r in per_attempt[a]),
                      key=lambda r: int(r.job_id))  # fmt: skip

    for job in running:  # followed to its end: the same attempt, the same Slurm job
        assert job_attempts(restored_db, job) == [(a, "succeeded", s) for a, _, s in at_backup[job]]
        assert [r.state for r in slurm_of(job)] == ["COMPLETED"]
    assert restored_service.status(cancelled_later).state == JobState.CANCELLED
    assert [s for _, s, _ in job_attempts(restored_db, cancelled_later)] == ["cancelled"]
    assert [r.state for r in slurm_of(cancelled_later)] == ["CANCELLED"]
    with restored_db.session() as session:  # accounting named root (the first daemon's scancel): an admin's cancel
        cancels = [(e.actor, e.detail.get("via")) for e in session.scalars(
            select(AuditEvent).where(AuditEvent.action == "job.cancel", AuditEvent.subject == cancelled_later))]  # fmt: skip
    assert cancels == [("root", "scancel")], cancels
    for job in waiting:  # cancelled before the restored daemon started, then run once under the copy
        assert [s for _, s, _ in job_attempts(restored_db, job)] == ["succeeded"]
        before, after = slurm_of(job)
        assert before.state == "CANCELLED" and after.state == "COMPLETED", (before, after)
        assert before.end <= after.start, f"{job} ran twice at once: {before} {after}"
    assert [r.state for r in slurm_of(ends_before_restore)] == ["COMPLETED", "COMPLETED"]  # a copy cannot know
    alice_late, root_late = late
    for job in late:
        with pytest.raises(NotFound):
            restored_service.status(job)
    assert [r.state for r in slurm_of(alice_late)] == ["COMPLETED"]  # ran once, untracked
    assert [r.state for r in slurm_of(root_late)] == ["CANCELLED"]  # the restored daemon's orphan
    log = second.log_text()
    assert f"orphan Slurm job {late_ids[root_late]} " in log, second.tail()
    # the copy cannot tell alice's jobs launched after it from a forged tag: each is audited once, left alone
    unknown_to_copy = {a: job for a, (job, _, _, _) in attempts(source.db).items() if a not in attempts(restored_db)}
    alices = {a for a, job in unknown_to_copy.items() if job not in (waiting[-1], root_late)}
    with restored_db.session() as session:
        spoofed = list(session.scalars(select(AuditEvent.subject).where(AuditEvent.action == "job.tag.spoofed")))
    assert sorted(spoofed) == sorted(alices), (spoofed, unknown_to_copy)

    nodes = build_inventory(CliSlurmClient().sinfo()).nodes
    with restored_db.session() as session:
        violations = check_invariants(session, slurm_active_names=active_names(site), nodes=nodes, grace_s=60)
    assert violations == []
    return {
        "backup_bytes": taken["bytes"], "backup_s": taken["seconds"], "restore_s": restored["seconds"],
        "unknown_jobs": len(listed), "cancel_s": round(cancel_s, 2), "recovery_s": round(recovery_s, 2),
        "cancelled_at": cancelled_at.isoformat(timespec="seconds"), "wall_s": round(time.monotonic() - t0, 1),
    }  # fmt: skip


def test_without_cancel_a_task_launched_after_the_backup_runs_twice_at_once(
    slurm_exclusive: None, pg_service: Service, tmp_path: Path, restore_url: str, alice_dir: Path
) -> None:
    """What ``db unknown-jobs --cancel`` is for: skipped, alice's job launched after the copy runs beside its rerun."""
    source = pg_service
    renew_site_id(source.db)  # a site of its own: Slurm still lists earlier runs' jobs for minutes
    first = Serve(tmp_path, "nocancel-first", pg_url())
    second = Serve(tmp_path, "nocancel-restored", restore_url)
    restored_db = Database(restore_url)
    try:
        spec = evaluation("bk-twice", "sleep 60", utcnow() + timedelta(seconds=8))
        job = source.submit(spec_from_dict(spec), principal=ALICE, submit_dir=str(alice_dir)).job.short_id
        since = first.start()
        wait_leading(source, first, since)
        backup = tmp_path / "store.dump"
        metasched(pg_url(), "db", "backup", str(backup))
        wait_for(lambda: [s for _, s, _ in job_attempts(source.db, job)] == ["running"], 60, "the job to run")
        first.stop()
        (after_copy, _, slurm_id), = job_attempts(source.db, job)
        listed = metasched(second.url, "db", "restore", str(backup))["unknown_jobs"]
        assert [(j["slurm_job_id"], j["runs_again"]) for j in listed] == [(slurm_id, True)]  # type: ignore[union-attr, index]
        site = stored_site_id(source.db) or ""

        def both_running() -> bool:
            ours = {a.attempt for a in active_jobs(site)}
            rerun = [a for a, state, _ in job_attempts(restored_db, job) if state == "running"]
            return after_copy in ours and bool(rerun) and rerun[0] in ours

        wait_leading(Service(restored_db), second, second.start())
        wait_for(both_running, 60, "the copy's rerun beside the job launched after the copy")
        with restored_db.session() as session:
            spoofed = list(session.scalars(select(AuditEvent.subject).where(AuditEvent.action == "job.tag.spoofed")))
        assert spoofed == [after_copy]  # audited once, never cancelled: two runs of one task at once
    finally:
        _clean_up(source, first, second, restored_db)
