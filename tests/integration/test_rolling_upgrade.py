"""A rolling upgrade on the dev cluster (issue 25): replicas of version N and N+1 side by side while the schema migrates.

Version N is the code of the commit before the newest migration was added (``git log`` over
``meta/store/migrations/versions/``), checked out with ``git worktree add``; N+1 is this tree.
Both run as real ``metasched serve`` processes (the same Python and venv, ``cwd`` and
``PYTHONPATH`` at their own tree) on one PostgreSQL store (a schema of its own in the test
database) and the real Slurm cluster. The steps, as docs/upgrades.md tells an admin:

1. the store is migrated to N's head with N's ``db upgrade``; N leads; jobs are submitted with
   N's CLI: long ones (still running when N stops) and short ones;
2. an N+1 replica starts on the older schema: it neither serves nor leads, and says why;
3. N+1's ``db upgrade --plan`` lists the pending migrations and whether each is online-safe;
   ``db upgrade`` runs while N leads — applied when every pending migration is online-safe,
   else refused, and then the offline path: N stopped first, ``db upgrade --offline-ok``;
4. online: N keeps leading on the newer schema and launches jobs submitted with N+1's CLI,
   while a second N replica can no longer start there; N+1 waits as a standby;
5. N is stopped with SIGTERM; N+1 takes over and follows what N launched — before migration
   0016 that is the legacy tag ``metasched:attempt=<id>`` with no site — and launches new jobs
   with its own tags.

Checked at the end: every job succeeded with one attempt, each attempt is exactly one Slurm job
(sacct, per tag), N's attempts were followed by N+1 to their end, no orphan was cancelled,
invariants I1–I6 hold. The figures (takeover time, jobs) are printed in one ROLLING line.
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
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import select, text

from meta.cycle.invariants import check_invariants
from meta.model.durations import utcnow
from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from meta.store.db import Database
from meta.store.models import Attempt, Task
from meta.store.site import stored_site_id
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.inventory import build_inventory
from slurm_bridge.tags import parse_tag
from tests.conftest import pg_url
from tests.harness import REPO, ServeProcess, lease, sacct_records, wait_for, wait_jobs

pytestmark = pytest.mark.slurm

VERSIONS = "meta/store/migrations/versions"
LONG_S, SHORT_S = 40, 4  # the long jobs run across the takeover
WAITING = "not serving the API nor leading"


# --- version N, from the repository's history -------------------------------------------------


def git(*args: str) -> str:
    """git runs a git command on the repository and returns its output (CalledProcessError on failure)."""
    return subprocess.run(["git", "-C", str(REPO), *args], capture_output=True, text=True, check=True,
                          timeout=60).stdout.strip()  # fmt: skip


def version_n() -> tuple[str, str]:
    """version_n is (the commit of version N, the newest migration's file): the code just before that migration."""
    newest = sorted((REPO / VERSIONS).glob("[0-9]*.py"))[-1]
    try:
        git("rev-parse", "--verify", "HEAD")
    except (subprocess.CalledProcessError, FileNotFoundError) as exc:
        pytest.skip(f"no git history at {REPO} ({exc}): version N is taken from it")
    added = git("log", "-n1", "--diff-filter=A", "--format=%H", "--", f"{VERSIONS}/{newest.name}")
    if not added:  # the newest migration is not committed yet: N is the last commit
        return git("rev-parse", "HEAD"), newest.name
    try:
        return git("rev-parse", "--verify", f"{added}^"), newest.name
    except subprocess.CalledProcessError:
        shallow = git("rev-parse", "--is-shallow-repository") == "true"
        pytest.skip(f"the commit that added {newest.name} has no parent here ({'a shallow clone' if shallow else 'the root'})")
        raise  # unreachable


@pytest.fixture
def worktree_n(tmp_path_factory: pytest.TempPathFactory) -> Iterator[tuple[Path, str, str]]:
    """worktree_n checks version N out into a temporary folder (removed after): (folder, commit, newest migration)."""
    commit, newest = version_n()
    folder = tmp_path_factory.mktemp("version-n") / "tree"
    git("worktree", "add", "--detach", str(folder), commit)
    try:
        yield folder, commit, newest
    finally:
        subprocess.run(["git", "-C", str(REPO), "worktree", "remove", "--force", str(folder)], capture_output=True,
                       timeout=60)  # fmt: skip
        subprocess.run(["git", "-C", str(REPO), "worktree", "prune"], capture_output=True, timeout=60)


@pytest.fixture
def store_url() -> Iterator[str]:
    """store_url is a fresh, empty PostgreSQL schema of its own in the test database (dropped after)."""
    schema = f"rolling_{uuid.uuid4().hex[:10]}"
    base = pg_url()
    admin = Database(base)
    try:
        with admin.engine.begin() as connection:
            connection.execute(text(f"CREATE SCHEMA {schema}"))
    except Exception as exc:  # noqa: BLE001 - no PostgreSQL: say so, as the other suites do
        admin.dispose()
        if os.environ.get("METASCHED_REQUIRE_PG") == "1":
            pytest.fail(f"PostgreSQL at {base}: {exc}")
        pytest.skip(f"PostgreSQL not reachable at {base}: {str(exc).splitlines()[0]}")
    try:
        yield f"{base}{'&' if '?' in base else '?'}options=-csearch_path%3D{schema}"
    finally:
        with admin.engine.begin() as connection:
            connection.execute(text(f"DROP SCHEMA IF EXISTS {schema} CASCADE"))
        admin.dispose()


# --- a replica of either version --------------------------------------------------------------


class Replica(ServeProcess):
    """Replica is ``metasched serve`` of the tree at ``repo`` (N's worktree, or this one) on ``db_url``."""

    def __init__(self, tmp_path: Path, holder: str, repo: Path, db_url: str):
        super().__init__(tmp_path, holder, lease_s=3.0, bin_dir=None, env={"PYTHONPATH": str(repo)},
                         extra=["--state-dir", str(tmp_path / f"state-{holder}")])  # fmt: skip
        self.repo, self.db_url = repo, db_url

    def argv(self) -> list[str]:
        argv = super().argv()
        argv[argv.index("--db") + 1] = self.db_url
        return argv

    def start(self) -> datetime:
        """start runs the replica with its own tree first on the path (``python -c`` puts the cwd first)."""
        self.incarnations += 1
        log = self.tmp_path / f"serve-{self.holder}-{self.incarnations}.log"
        self.logs.append(log)
        env = {**os.environ, **self.env}
        at = utcnow()
        with log.open("wb") as out:
            self.proc = subprocess.Popen(self.argv(), cwd=self.repo, stdout=out, stderr=subprocess.STDOUT, env=env)
        return at

    def stop(self, timeout_s: float = 60) -> float:
        """stop sends SIGTERM and waits for the exit; returns the seconds it took."""
        assert self.proc is not None
        started = time.monotonic()
        self.proc.send_signal(signal.SIGTERM)
        self.proc.wait(timeout=timeout_s)
        return time.monotonic() - started


def cli(repo: Path, db_url: str, *args: str, cwd: Path | None = None) -> subprocess.CompletedProcess[str]:
    """cli runs ``metasched --db URL ARGS`` of the tree at ``repo`` (local mode: root on the server host)."""
    return subprocess.run([sys.executable, "-c", "from cli.main import main; main()", "--db", db_url, *args],
                          cwd=cwd or repo, env={**os.environ, "PYTHONPATH": str(repo)}, capture_output=True, text=True,
                          timeout=120)  # fmt: skip


def submit(repo: Path, db_url: str, folder: Path, name: str, seconds: int) -> str:
    """submit stores one evaluation job with the CLI of the tree at ``repo``; returns its id."""
    spec = {"kind": "evaluation", "name": name, "tenant": "tenant-a", "time_limit": "5m",
            "resources": {"cpus": 1, "memory": "256M"}, "command": f"sleep {seconds}"}  # fmt: skip
    job_file = folder / f"{name}.json"
    job_file.write_text(json.dumps(spec))
    done = cli(repo, db_url, "submit", "-f", str(job_file), "--json", cwd=folder)
    assert done.returncode == 0, f"{name}: {done.stderr}"
    return str(json.loads(done.stdout)["id"])


@dataclass
class Tags:
    """Tags are what Slurm holds for this store's attempts: (attempt, Slurm id, state, its tag's site)."""

    rows: list[tuple[str, str, str, str | None]]

    def per_attempt(self) -> dict[str, list[str]]:
        """per_attempt maps each attempt to its Slurm job ids."""
        found: dict[str, list[str]] = {}
        for attempt, job_id, _state, _site in self.rows:
            found.setdefault(attempt, []).append(job_id)
        return found


def slurm_tags(attempt_ids: set[str]) -> Tags:
    """slurm_tags reads sacct's records of these attempts, by the tag in each job's comment (either format)."""
    rows = []
    for record in sacct_records("now-1hours"):
        tag = parse_tag(record.name, record.comment)
        if tag is not None and tag.attempt_id in attempt_ids:
            rows.append((tag.attempt_id, record.job_id, record.state, tag.site))
    return Tags(rows)


def active_names(attempt_ids: set[str], site: str) -> set[str]:
    """active_names are the ``ms-<attempt>`` keys of this store's jobs Slurm still has (its site, or legacy tags of its attempts)."""
    out = subprocess.run(["squeue", "-h", "-t", "PD,R,CG,CF", "-o", "%k|%j"], capture_output=True, text=True,
                         check=True, timeout=60).stdout  # fmt: skip
    names = set()
    for line in out.splitlines():
        job_comment, _, name = line.strip().partition("|")
        tag = parse_tag(name, job_comment)
        if tag is not None and (tag.site == site or (tag.site is None and tag.attempt_id in attempt_ids)):
            names.add(f"ms-{tag.attempt_id}")
    return names


def attempts(service: Service) -> list[Attempt]:
    """attempts are every attempt of the store (detached)."""
    with service.db.session() as session:
        rows = list(session.scalars(select(Attempt)))
        session.expunge_all()
        return rows


def slurm_states(service: Service) -> dict[str, str]:
    """slurm_states maps each attempt with a Slurm job to that job's squeue state (absent: not in squeue)."""
    ids = {a.slurm_job_id: a.id for a in attempts(service) if a.slurm_job_id}
    if not ids:
        return {}
    out = subprocess.run(["squeue", "-h", "-j", ",".join(ids), "-o", "%i|%T"], capture_output=True, text=True,
                         timeout=60).stdout  # fmt: skip
    states = {}
    for line in out.splitlines():
        job_id, _, state = line.strip().partition("|")
        if job_id in ids:
            states[ids[job_id]] = state
    return states


def test_rolling_upgrade_from_n_to_n_plus_1(
    slurm_exclusive: None, worktree_n: tuple[Path, str, str], store_url: str, tmp_path: Path
) -> None:
    started = time.monotonic()
    tree_n, commit_n, newest = worktree_n
    jobs_dir = tmp_path / "jobs"
    jobs_dir.mkdir()
    old = Replica(tmp_path, "n-leader", tree_n, store_url)
    new = Replica(tmp_path, "n1-standby", REPO, store_url)
    late = Replica(tmp_path, "n-late", tree_n, store_url)
    replicas = [old, new, late]
    service = Service(Database(store_url))
    try:
        # 1. the store at N's head; N leads; jobs through N's CLI
        made = cli(tree_n, store_url, "db", "upgrade", "--json")
        assert made.returncode == 0, made.stderr
        head_n = json.loads(made.stdout)["to"]
        assert head_n < newest[:4], (head_n, newest)
        since = old.start()
        wait_for(lambda: _leads(service, old, since), 60, "N to lead")
        wait_for(lambda: "synced from Slurm" in old.log_text() or _cycled(service), 30, "N's first period")
        long_jobs = [submit(tree_n, store_url, jobs_dir, f"roll-long-{i}", LONG_S) for i in range(4)]
        short_jobs = [submit(tree_n, store_url, jobs_dir, f"roll-short-{i}", SHORT_S) for i in range(2)]
        wait_for(lambda: sum(s == "RUNNING" for s in slurm_states(service).values()) >= 4, 60,
                 "N's long jobs to run in Slurm", poll_s=0.5)  # fmt: skip

        # 2. an N+1 replica on the older schema: it says why it waits, and neither serves nor leads
        new.start()
        wait_for(lambda: WAITING in new.log_text(), 60, "N+1 to say it waits for db upgrade")
        assert new.alive(), new.tail()
        assert not new.socket_path.exists(), "N+1 serves its API on a schema older than it needs"

        # 3. N+1's plan, then db upgrade while N leads
        plan_run = cli(REPO, store_url, "db", "upgrade", "--plan", "--json")
        assert plan_run.returncode == 0, plan_run.stderr
        plan = json.loads(plan_run.stdout)
        pending = [(step["revision"], step["online_safe"]) for step in plan["pending"]]
        assert plan["at"] == head_n and pending and pending[-1][0] == newest[:4], plan
        assert any(f"'{old.holder}' leads" in line for line in plan["running"]), plan
        online = all(safe for _rev, safe in pending)
        upgraded = cli(REPO, store_url, "db", "upgrade")
        if online:
            assert upgraded.returncode == 0, upgraded.stderr
            assert _lead_holder(service) == old.holder and old.alive(), old.tail()
            # 4. N leads on the newer schema: it launches what N+1's CLI submits
            middle_jobs = [submit(REPO, store_url, jobs_dir, f"roll-mid-{i}", SHORT_S) for i in range(2)]
            wait_for(lambda: _launched(service, middle_jobs), 60, "N to launch jobs submitted with N+1's CLI")
            # a replica of N can no longer start on it (a crashed N restarted by systemd)
            late.start()
            wait_for(lambda: not late.alive(), 60, "a late N replica to give up")
            assert late.proc is not None and late.proc.returncode != 0, late.tail()
            assert (f"Can't locate revision identified by '{plan['head']}'" in late.log_text()
                    or "which this version does not ship" in late.log_text()), late.tail()  # fmt: skip
            wait_for(lambda: "serving as n1-standby" in new.log_text(), 60, "N+1 to start once the schema is its own")
            assert _lead_holder(service) == old.holder, "N+1 took the lead from a healthy N"
            # 5. N stops; N+1 takes over
            stopping = time.monotonic()
            stop_s = old.stop()
            wait_for(lambda: _lead_holder(service) == new.holder, 60, "N+1 to take over", poll_s=0.05)
            takeover_s = time.monotonic() - stopping
        else:
            assert upgraded.returncode == 1 and "is not online-safe" in upgraded.stderr, upgraded.stderr
            middle_jobs = []
            stopping = time.monotonic()
            stop_s = old.stop()  # the offline path: every replica of N stopped, then the migration
            offline = cli(REPO, store_url, "db", "upgrade", "--offline-ok")
            assert offline.returncode == 0, offline.stderr
            wait_for(lambda: _lead_holder(service) == new.holder, 60, "N+1 to lead", poll_s=0.05)
            takeover_s = time.monotonic() - stopping
        took_over, took_over_at = time.monotonic(), utcnow()
        assert any(s == "RUNNING" for s in slurm_states(service).values()), "no job of N ran across the takeover"
        new_jobs = [submit(REPO, store_url, jobs_dir, f"roll-new-{i}", SHORT_S) for i in range(3)]
        every = long_jobs + short_jobs + middle_jobs + new_jobs
        wait_jobs(service, every, timeout_s=150, daemons=[new])
        finished_s = time.monotonic() - took_over

        # every job succeeded with exactly one attempt, each one Slurm job, none lost or cancelled
        states = {job: service.status(job).state for job in every}
        assert set(states.values()) == {JobState.SUCCEEDED}, states
        rows = attempts(service)
        with service.db.session() as session:
            tasks = list(session.scalars(select(Task.id)))
        assert len(rows) == len(tasks) == len(every), (len(rows), len(tasks), len(every))
        assert {a.state for a in rows} == {AttemptState.SUCCEEDED.value}, {a.id: a.state for a in rows}
        ids = {a.id for a in rows}
        tags = _settled_tags(ids)
        per_attempt = tags.per_attempt()
        assert set(per_attempt) == ids and all(len(v) == 1 for v in per_attempt.values()), per_attempt
        assert {state for _a, _j, state, _s in tags.rows} == {"COMPLETED"}, tags.rows
        assert "orphan Slurm job" not in new.log_text(), new.tail()

        # N's attempts carry N's tag (legacy before 0016: no site) and N+1 followed them to their end
        site = stored_site_id(service.db) or ""
        legacy_n = "site=" not in (tree_n / "slurm_bridge" / "tags.py").read_text()
        epoch_n = min(a.epoch for a in rows)
        by_n = {a.id for a in rows if a.epoch == epoch_n}
        site_of = {attempt: tag_site for attempt, _j, _s, tag_site in tags.rows}
        for attempt in by_n:
            assert site_of[attempt] == (None if legacy_n else site), (attempt, site_of[attempt])
        followed = [a for a in rows if a.id in by_n and a.ended_at is not None and a.ended_at > took_over_at]
        assert len(followed) >= 1, "N+1 followed none of N's jobs to their end"
        by_new = ids - by_n
        assert by_new and all(site_of[attempt] == site for attempt in by_new), (by_new, site_of)

        nodes = build_inventory(CliSlurmClient().sinfo()).nodes
        with service.db.session() as session:
            violations = check_invariants(session, slurm_active_names=active_names(ids, site), nodes=nodes)
        assert violations == [], violations
        print(f"\nROLLING N={commit_n[:8]} (head {head_n}) -> N+1 (head {plan['head']}): "
              f"{'online' if online else 'offline'} upgrade; {len(every)} jobs, {len(by_n)} launched by N "
              f"({'legacy' if legacy_n else 'site'} tags), {len(followed)} of them followed to their end by N+1, "
              f"{len(by_new)} launched by N+1; N stopped in {stop_s:.1f}s, N+1 led {takeover_s:.2f}s after the "
              f"SIGTERM; all done {finished_s:.0f}s after the takeover; 0 duplicates; test {time.monotonic() - started:.0f}s")
    finally:
        for replica in replicas:
            replica.kill()
        leftover = [a.slurm_job_id for a in attempts(service) if a.slurm_job_id]
        if leftover:
            subprocess.run(["scancel", *leftover], capture_output=True, timeout=30)
        service.db.dispose()
        shutil.rmtree(jobs_dir, ignore_errors=True)


def _leads(service: Service, replica: Replica, since: datetime) -> bool:
    assert replica.alive(), replica.tail()
    row = lease(service)
    return row is not None and row.holder == replica.holder and row.renewed_at > since


def _lead_holder(service: Service) -> str | None:
    row = lease(service)
    return row.holder if row is not None and row.expires_at > utcnow() else None


def _cycled(service: Service) -> bool:
    with service.db.session() as session:
        return bool(session.execute(text("SELECT count(*) FROM cycles")).scalar())


def _launched(service: Service, jobs: list[str]) -> bool:
    """_launched: every task of these jobs has an attempt with a Slurm job."""
    tasks = [task for job in jobs for task in service.status(job).tasks]
    return all(task.attempts and all(a.slurm_job_id for a in task.attempts) for task in tasks)


def _settled_tags(ids: set[str]) -> Tags:
    """_settled_tags waits until accounting holds every attempt's job, ended (slurmdbd is asynchronous)."""
    found = slurm_tags(ids)
    deadline = time.monotonic() + 60
    while time.monotonic() < deadline:
        found = slurm_tags(ids)
        if set(found.per_attempt()) == ids and all(state == "COMPLETED" for _a, _j, state, _s in found.rows):
            break
        time.sleep(1)
    return found

