"""Two metasched sites share the dev cluster and never touch each other's jobs (issue 26).

Two real ``metasched serve`` daemons, "production" and "staging", each with its own SQLite
store, state folder and API socket (MUNGE, the dev cluster's associations, the real Slurm
commands), run side by side on the one cluster, as root both. alice and bob submit through each
site's API with the installed CLI, so the same users run jobs for both sites at once — the Unix
user alone cannot tell the sites' jobs apart, only the tag's site can. Checked:

- every job of each site runs to completion: no Slurm job of either site is CANCELLED, each job
  has exactly one attempt, and each store holds exactly the attempts whose Slurm jobs name its site;
- neither audit has a ``job.tag.spoofed`` row, and each daemon logs the other site as sharing the
  cluster, left alone;
- each daemon still cancels its own orphan — a job root (the daemons' user) submits by hand
  with the site's tag and an attempt no store has, as the orphan tests of the reconciler do —
  and only its own: the other site's log never names it;
- a job with a tag older than sites naming no attempt of either store is cancelled by neither.
"""

from __future__ import annotations

import shutil
import signal
import subprocess
import sys
import tempfile
import time
import uuid
from collections.abc import Callable, Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest
from sqlalchemy import select

from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from meta.store.db import Database
from meta.store.models import Attempt, AuditEvent
from meta.store.site import stored_site_id
from slurm_bridge import tags
from tests.identity.conftest import MUNGE_SOCKET, REPO, installed_cli  # noqa: F401 - fixtures
from tests.identity.users import Call, run_one

pytestmark = pytest.mark.slurm

SITES = ("production", "staging")
USERS = {"alice": "tenant-a", "bob": "tenant-b"}
JOB = """\
kind: evaluation
name: {name}
tenant: {tenant}
resources: {{cpus: 1, memory: 1G}}
time_limit: 5m
command: sleep 20
"""
ROOT_JOB = ("-A", "tenant-a", "-c", "1", "--mem=100M", "-t", "5", "--chdir=/tmp", "-o", "/dev/null")


@dataclass
class Site:
    """Site is one running ``metasched serve``: its name, folder, store, site id and process."""

    name: str
    folder: Path
    db: Database
    proc: subprocess.Popen[bytes]
    site: str = ""

    @property
    def api(self) -> str:
        """api is METASCHED_API for the users."""
        return f"unix://{self.folder / 'run' / 'api.sock'}"

    @property
    def log(self) -> Path:
        """log is the daemon's output."""
        return self.folder / "serve.log"

    def tail(self) -> str:
        """tail is the end of the daemon's log, for failure messages."""
        return self.log.read_text(errors="replace")[-3000:] if self.log.exists() else ""


def wait_for(what: str, done: Callable[[], bool], timeout_s: float, why: Callable[[], str] = str) -> None:
    """wait_for polls ``done`` until it holds, failing with ``why()`` after ``timeout_s``."""
    deadline = time.monotonic() + timeout_s
    while not done():
        assert time.monotonic() < deadline, f"timed out waiting for {what}\n{why()}"
        time.sleep(0.5)


def start_site(name: str, root: Path) -> Site:
    """start_site runs one ``metasched serve`` with its own store, state folder and API socket."""
    folder = root / name
    folder.mkdir(mode=0o755)
    url = f"sqlite:///{folder / 'store' / 'metasched.sqlite'}"
    argv = [
        sys.executable, "-c", "from cli.main import main; main()", "--db", url, "serve",
        "--state-dir", str(folder / "state"), "--metrics-port", "0", "--period", "1",
        "--api-socket", str(folder / "run" / "api.sock"), "--api-listen", "off",
        "--munge-socket", str(MUNGE_SOCKET), "--site-name", name, "--log-level", "INFO",
        "--unknown-window", "5", "--lost-grace", "120", "--holder", f"two-sites-{name}",
    ]  # fmt: skip
    with (folder / "serve.log").open("wb") as out:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    site = Site(name, folder, Database(url), proc)
    wait_for(f"{name}'s API socket", lambda: _alive(site) and (folder / "run" / "api.sock").exists(), 60, site.tail)
    wait_for(f"{name}'s site id", lambda: stored_site_id(site.db) is not None, 60, site.tail)
    site.site = stored_site_id(site.db) or ""
    return site


def _alive(site: Site) -> bool:
    """_alive asserts the daemon did not exit on its own."""
    assert site.proc.poll() is None, f"{site.name} exited:\n{site.tail()}"
    return True


def stop_site(site: Site) -> None:
    """stop_site stops the daemon (SIGTERM, then SIGKILL) and closes its store."""
    site.proc.send_signal(signal.SIGTERM)
    try:
        site.proc.wait(timeout=60)
    except subprocess.TimeoutExpired:
        site.proc.kill()
        site.proc.wait()
    site.db.dispose()


@pytest.fixture
def two_sites(slurm_exclusive: None, installed_cli: Path) -> Iterator[dict[str, Site]]:  # noqa: F811 - fixture
    """two_sites runs production and staging side by side in a folder every dev user may enter."""
    root = Path(tempfile.mkdtemp(prefix="metasched-two-sites-", dir="/tmp"))
    root.chmod(0o755)
    sites: dict[str, Site] = {}
    try:
        for name in SITES:
            sites[name] = start_site(name, root)
        yield sites
    finally:
        for site in sites.values():
            stop_site(site)
        shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def user_dirs() -> Iterator[dict[str, Path]]:
    """user_dirs is a fresh folder in alice's and in bob's home, made by each (their jobs run there)."""
    made = {user: Path(f"/home/{user}") / f"ms-two-sites-{uuid.uuid4().hex[:8]}" for user in USERS}
    for user, folder in made.items():
        subprocess.run(["runuser", "-u", user, "--", "mkdir", "-m", "0755", str(folder)], check=True, timeout=30)
    yield made
    for folder in made.values():
        shutil.rmtree(folder, ignore_errors=True)


def submit(site: Site, user: str, folder: Path) -> str:
    """submit sends one short evaluation job to ``site``'s API as ``user``; returns its job id."""
    name = f"{site.name}-{user}"
    job_file = folder / f"{name}.yaml"
    subprocess.run(["runuser", "-u", user, "--", "tee", str(job_file)], input=JOB.format(name=name, tenant=USERS[user]),
                   capture_output=True, text=True, check=True, timeout=30)  # fmt: skip
    done = run_one(Call(user, ("submit", "-f", job_file.name, "--json")), site.api, folder)
    assert done.code == 0, f"{user} -> {site.name}: {done.stderr}\n{site.tail()}"
    return str(done.json()["id"])  # type: ignore[index]


def sbatch_as_root(comment: str) -> str:
    """sbatch_as_root submits a plain job as root (the daemons' user) with ``comment``; returns its Slurm id."""
    done = subprocess.run(["sbatch", "--parsable", *ROOT_JOB, "-J", "two-sites-stray", f"--comment={comment}",
                           "--wrap", "sleep 240"], capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def sacct_rows(job_ids: list[str]) -> dict[str, tuple[str, str]]:
    """sacct_rows maps Slurm job ids to (state, comment) as accounting records them."""
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", ",".join(job_ids), "-o", "JobID,State,Comment%200"],
                         capture_output=True, text=True, timeout=60).stdout  # fmt: skip
    rows = {}
    for line in out.splitlines():
        job_id, state, comment = (line.split("|", 2) + ["", ""])[:3]
        rows[job_id] = (state, comment)
    return rows


def slurm_state(job_id: str) -> str:
    """slurm_state is the job's state: squeue while it has it, else accounting ('' when neither has it yet)."""
    out = subprocess.run(["squeue", "-h", "-j", job_id, "-o", "%T"], capture_output=True, text=True, timeout=60)
    if out.returncode == 0 and out.stdout.strip():
        return out.stdout.strip()
    return sacct_rows([job_id]).get(job_id, ("", ""))[0]


def attempts(site: Site) -> list[Attempt]:
    """attempts are every attempt of the site's store (detached)."""
    with site.db.session() as session:
        rows = list(session.scalars(select(Attempt)))
        session.expunge_all()
        return rows


def test_two_sites_on_one_cluster_leave_each_others_jobs_alone(
    two_sites: dict[str, Site], user_dirs: dict[str, Path]
) -> None:
    production, staging = two_sites["production"], two_sites["staging"]
    assert production.site != staging.site
    strays = {name: sbatch_as_root(tags.comment(site.site, str(uuid.uuid4()))) for name, site in two_sites.items()}
    old_stray = sbatch_as_root(f"metasched:attempt={uuid.uuid4()}")  # older than sites, no store has it
    try:
        check_both_sites(two_sites, user_dirs, strays, old_stray)
    finally:
        subprocess.run(["scancel", old_stray, *strays.values()], capture_output=True, timeout=30)


def check_both_sites(two_sites: dict[str, Site], user_dirs: dict[str, Path], strays: dict[str, str], old_stray: str) -> None:
    """check_both_sites submits each user's job to each site and checks what each daemon did in Slurm."""
    production, staging = two_sites["production"], two_sites["staging"]
    jobs = {name: [submit(site, user, user_dirs[user]) for user in USERS] for name, site in two_sites.items()}
    services = {name: Service(site.db) for name, site in two_sites.items()}

    def all_done() -> bool:
        for name, site in two_sites.items():
            _alive(site)
            if any(services[name].status(job).state not in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED)
                   for job in jobs[name]):  # fmt: skip
                return False
        return True

    wait_for("both sites' jobs to end", all_done, 300, lambda: production.tail() + "\n" + staging.tail())
    for name in SITES:
        assert [services[name].status(job).state for job in jobs[name]] == [JobState.SUCCEEDED] * len(USERS)
    # each site cancelled its own orphan, and only that one
    for name, stray in strays.items():
        wait_for(f"{name}'s orphan {stray} to be cancelled", lambda s=stray: slurm_state(s).startswith("CANCELLED"), 60,
                 lambda: production.tail() + "\n" + staging.tail())  # fmt: skip
    for name, site in two_sites.items():
        log = site.log.read_text(errors="replace")
        other = strays["staging" if name == "production" else "production"]
        assert f"orphan Slurm job {strays[name]} " in log and f"orphan Slurm job {other} " not in log, site.tail()
        assert f"orphan Slurm job {old_stray} " not in log
        other_site = (staging if site is production else production).site
        assert f"metasched site {other_site!r} share this cluster: left alone" in log
        assert f"site {site.site} ({name})" in log  # the start-up line names the site id and its human name
    assert slurm_state(old_stray) in ("RUNNING", "PENDING")  # a tag older than sites, of neither store

    # every job of each site ran to completion, one attempt each, tagged with its own site
    slurm_ids = {name: [str(a.slurm_job_id) for a in attempts(site)] for name, site in two_sites.items()}
    every = [job_id for ids in slurm_ids.values() for job_id in ids]
    wait_for("accounting to record every job", lambda: set(every) <= set(sacct_rows(every)), 60)
    rows = sacct_rows(every)
    for name, site in two_sites.items():
        stored = attempts(site)
        assert len(stored) == len(USERS) and all(a.state == AttemptState.SUCCEEDED.value for a in stored)
        for row in stored:
            state, comment = rows[str(row.slurm_job_id)]
            assert state == "COMPLETED", (name, row.slurm_job_id, state)
            assert tags.parse_tag("", comment) == tags.AttemptTag(row.id, None, site.site)
        with site.db.session() as session:
            actions = set(session.scalars(select(AuditEvent.action)))
        assert "job.tag.spoofed" not in actions, actions
    assert not set(slurm_ids["production"]) & set(slurm_ids["staging"])
