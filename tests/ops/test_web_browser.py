"""The web view in a real browser: headless Chromium against ``metasched serve`` on the dev cluster (issue 16).

One ``metasched serve`` (PostgreSQL, the real Slurm commands, MUNGE and Slurm's associations: the
production wiring) runs jobs for alice (tenant-a: a running evaluation, and a gang that waits on
the tenant's a100 limit) and bob (tenant-b: a running evaluation). Each user runs the installed
``metasched web``, and Chromium (the Debian package), run as that user, opens the link and then
each page: the DOM is checked (``--dump-dom``) and every page is screenshotted into
``$METASCHED_ARTIFACTS/web`` (default ``.ci/artifacts/web``), which CI keeps. Alice's browser
gets 404 for bob's job and 403 for the admin page; oscar (Slurm Operator) sees the admin page
with alice's login in the audit; a link opened twice, or no link at all, gets the page that says
to run ``metasched web``. Page render times (the server's ``Server-Timing``) are printed.
"""

from __future__ import annotations

import html
import json
import os
import shutil
import socket
import subprocess
import tempfile
import time
import urllib.request
from collections.abc import Iterator
from pathlib import Path

import pytest

from meta.service.api import Service
from tests.harness import REPO, ServeProcess, cancel_daemon_jobs, wait_for
from tests.identity.conftest import installed_cli  # noqa: F401 - the fixture: deploy/install-cli
from tests.identity.users import Call, run_one

ARTIFACTS = Path(os.environ.get("METASCHED_ARTIFACTS") or REPO / ".ci" / "artifacts") / "web"
MUNGE_SOCKET = "/run/munge/munge.socket.2"
WINDOW = "1280,900"

RUNNING_EVAL = """kind: evaluation
name: {name}
tenant: {tenant}
resources: {{cpus: 2, memory: 4Gi, gpus: {gpus}, gpu_type: {gpu_type}}}
time_limit: 10m
command: sleep 600
"""
WAITING_GANG = """kind: training
name: big-gang
tenant: tenant-a
workers: 2
resources: {cpus: 4, memory: 8Gi, gpus: 8, gpu_type: a100}
time_limit: 10m
command: sleep 600
"""


def _free_port() -> int:
    with socket.socket() as sock:
        sock.bind(("127.0.0.1", 0))
        return int(sock.getsockname()[1])


@pytest.fixture(scope="module")
def chromium() -> str:
    """chromium is the browser's path (deploy/run-tests installs the Debian package)."""
    found = shutil.which("chromium")
    if found is None:
        message = "chromium is not installed: apt-get install chromium (deploy/run-tests does)"
        if os.environ.get("METASCHED_REQUIRE_SLURM") == "1":
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    return found


class Browser:
    """Browser is one user's headless Chromium with a profile of its own (its cookies persist between runs).

    Chromium runs as the dev user, as a person opens the link: as root it would need --no-sandbox
    (Chromium refuses to start its setuid/namespace sandbox for root, crbug.com/638180), and a
    browser without its sandbox is not what users run.
    """

    def __init__(self, binary: str, user: str, home: Path, name: str) -> None:
        self.binary, self.user = binary, user
        self.profile = home / f"profile-{name}"
        self.profile.mkdir()
        shutil.chown(self.profile, user, user)
        self.shots = home

    def _run(self, *args: str) -> str:
        argv = ["runuser", "-u", self.user, "--", self.binary, "--headless=new", f"--user-data-dir={self.profile}",
                "--no-first-run", "--hide-scrollbars", "--disable-gpu", *args]  # fmt: skip
        done = subprocess.run(argv, capture_output=True, text=True, timeout=90)
        assert done.returncode == 0, done.stderr[-2000:]
        return done.stdout

    def dom(self, url: str) -> str:
        """dom is the page's DOM once it loaded."""
        return self._run("--dump-dom", url)

    def screenshot(self, url: str, name: str, window: str = WINDOW) -> Path:
        """screenshot saves the page as ARTIFACTS/<name>.png and returns that path."""
        shot = self.shots / f"{name}.png"
        self._run(f"--screenshot={shot}", f"--window-size={window}", url)
        ARTIFACTS.mkdir(parents=True, exist_ok=True)
        target = ARTIFACTS / f"{name}.png"
        shutil.copyfile(shot, target)
        assert target.stat().st_size > 5_000, f"{target}: an empty screenshot"
        return target


@pytest.fixture
def homes() -> Iterator[dict[str, Path]]:
    """homes is a folder per dev user (owned by it) under a 0755 folder: job files, submit dirs, browser profiles."""
    root = Path(tempfile.mkdtemp(prefix="metasched-web-", dir="/tmp"))
    root.chmod(0o755)
    folders = {}
    for user in ("alice", "bob", "oscar"):
        folders[user] = root / user
        folders[user].mkdir()
        shutil.chown(folders[user], user, user)
    yield folders
    shutil.rmtree(root, ignore_errors=True)


@pytest.fixture
def served(
    slurm_exclusive: None, pg_service: Service, installed_cli: Path, tmp_path: Path  # noqa: F811
) -> Iterator[tuple[str, ServeProcess]]:
    """served is one metasched serve on the dev cluster (production MUNGE wiring) and its API, http://127.0.0.1:PORT."""
    port = _free_port()
    serve = ServeProcess(tmp_path, "web", lease_s=5.0, bin_dir=None,
                         extra=["--api-listen", f"127.0.0.1:{port}", "--munge-socket", MUNGE_SOCKET])  # fmt: skip
    serve.start()
    api = f"http://127.0.0.1:{port}"
    try:
        wait_for(lambda: _healthy(api), 60, f"the API at {api}\n{serve.tail()}")
        yield api, serve
    finally:
        serve.kill()
        cancel_daemon_jobs()


def _healthy(api: str) -> bool:
    try:
        with urllib.request.urlopen(f"{api}/healthz", timeout=2) as answer:  # noqa: S310 - the local test server
            return answer.status == 200
    except OSError:
        return False


def as_user(user: str, api: str, cwd: Path, *args: str) -> dict:
    """as_user runs the installed ``metasched ... --json`` as ``user`` and returns its answer."""
    outcome = run_one(Call(user, (*args, "--json")), api, cwd)
    assert outcome.code == 0, f"{user} {args}: {outcome.stderr}"
    return outcome.json()  # type: ignore[return-value]


def submit(user: str, api: str, home: Path, name: str, text: str) -> str:
    """submit writes a job file in the user's folder and submits it as the user; the job's short id."""
    path = home / f"{name}.yaml"
    path.write_text(text)
    shutil.chown(path, user, user)
    return str(as_user(user, api, home, "submit", "-f", str(path))["short_id"])


def render_times(api: str, cookie: str, paths: dict[str, str]) -> dict[str, tuple[float, float]]:
    """render_times is each page's (server render ms from Server-Timing, wall ms) with a session cookie."""
    times = {}
    for name, path in paths.items():
        request = urllib.request.Request(api + path, headers={"Cookie": f"metasched_session={cookie}"})
        started = time.perf_counter()
        with urllib.request.urlopen(request, timeout=30) as answer:  # noqa: S310 - the local test server
            answer.read()
            server = float(answer.headers["Server-Timing"].split("dur=")[1])
        times[name] = (server, (time.perf_counter() - started) * 1000)
    return times


def session_cookie(api: str, user: str, home: Path) -> str:
    """session_cookie redeems a fresh link outside the browser and returns the session cookie's value."""
    link = as_user(user, api, home, "web")["url"]
    with urllib.request.urlopen(link, timeout=30) as answer:  # noqa: S310 - the local test server
        header = answer.headers["Set-Cookie"]
    return header.split("metasched_session=", 1)[1].split(";", 1)[0]


def test_web_view_in_chromium(chromium: str, served: str, homes: dict[str, Path], pg_service: Service) -> None:
    api, serve = served
    alice, bob, oscar = homes["alice"], homes["bob"], homes["oscar"]
    running = submit("alice", api, alice, "eval", RUNNING_EVAL.format(name="alice-eval", tenant="tenant-a", gpus=1,
                                                                       gpu_type="a100"))  # fmt: skip
    bobs = submit("bob", api, bob, "eval", RUNNING_EVAL.format(name="bob-secret-eval", tenant="tenant-b", gpus=2,
                                                                gpu_type="t4"))  # fmt: skip
    waiting = ""  # the gang is submitted once alice's evaluation runs (see below)

    def started() -> bool:
        states = [pg_service.status(ref).tasks[0].state for ref in (running, bobs)]
        return states == ["running", "running"]

    def states() -> str:
        return json.dumps({ref: [[t.state, t.reason, [(a.state, a.reason) for a in t.attempts]]
                                 for t in pg_service.status(ref).tasks] for ref in (running, waiting, bobs) if ref})  # fmt: skip

    try:
        wait_for(started, 120, "alice's and bob's evaluations running in Slurm")
    except AssertionError as exc:
        raise AssertionError(f"{exc}: {states()}\n{serve.tail()}") from None
    # Only now the gang: its 2 x 8 a100 fit tenant-a's limit (16) on an idle cluster, so submitted
    # in the same cycle as the evaluation it may win the a100 nodes (CI at 7b27778 saw that).
    waiting = submit("alice", api, alice, "gang", WAITING_GANG)
    wait_for(lambda: bool(as_user("alice", api, alice, "explain", waiting)["tasks"][0]["code"]), 60, "a typed reason")

    link = as_user("alice", api, alice, "web")
    assert link["user"] == "alice" and link["url"].startswith(api + "/web/login?t=")
    browser = Browser(chromium, "alice", alice, "alice")
    first = browser.dom(link["url"])  # the login page (or, when Chromium waited, the cluster map it refreshes to)
    assert "Signed in as alice" in first or "Cluster map" in first, first[-3000:]

    cluster = browser.dom(f"{api}/web/")  # the session cookie from the login page, in alice's profile
    assert "Cluster map" in cluster and "alice · " in cluster, cluster[-3000:]
    for text in ("a100", "h100", "t4", "leaf1", "leaf2", "spine", running, "tenant-b (2)", "Fragmentation"):
        assert text in cluster, text
    assert bobs not in cluster and "bob-secret-eval" not in cluster
    browser.screenshot(f"{api}/web/", "cluster-map")

    queues = browser.dom(f"{api}/web/queues")
    for text in ("tenant-a", "tenant-b", "fair share", "usage share", "<svg", "Pending tasks"):
        assert text in queues, text
    browser.screenshot(f"{api}/web/queues", "queues")

    jobs = browser.dom(f"{api}/web/jobs")
    assert running in jobs and waiting in jobs and bobs not in jobs
    browser.screenshot(f"{api}/web/jobs", "jobs")

    gang = browser.dom(f"{api}/web/jobs/{waiting}")
    reason = as_user("alice", api, alice, "explain", waiting)["tasks"][0]["code"]
    assert "Why it waits" in gang and reason in gang and "what would help" in gang, gang[-3000:]
    history = as_user("alice", api, alice, "explain", waiting, "--history")
    assert "Decision record" in gang and f"{history['placed_while_waiting']} other placements" in gang
    assert all(r["job"] in gang and html.escape(r["why"], quote=False) in gang for r in history["ran_before"]), (history, gang[-3000:])
    browser.screenshot(f"{api}/web/jobs/{waiting}", "job-waiting", "1280,760")
    attempt = pg_service.status(running).tasks[0].attempts[0]
    eval_page = browser.dom(f"{api}/web/jobs/{running}")
    assert f"{alice}/slurm-{attempt.slurm_job_id}.out" in eval_page and "running" in eval_page
    browser.screenshot(f"{api}/web/jobs/{running}", "job-running", "1280,760")

    theirs = browser.dom(f"{api}/web/jobs/{bobs}")
    assert "Not found" in theirs and "bob-secret-eval" not in theirs and "tenant-b" not in theirs
    browser.screenshot(f"{api}/web/jobs/{bobs}", "alice-opens-bobs-job")
    assert "for admins" in browser.dom(f"{api}/web/admin")

    reuse = Browser(chromium, "alice", alice, "reuse").dom(link["url"])
    assert "used already" in reuse and "metasched web" in reuse
    nobody = Browser(chromium, "bob", bob, "nobody").dom(f"{api}/web/jobs/{running}")
    assert "not signed in" in nobody and "metasched web" in nobody and running not in nobody.split("</h1>", 1)[1]

    bob_browser = Browser(chromium, "bob", bob, "bob")
    bob_browser.dom(as_user("bob", api, bob, "web")["url"])
    assert "bob-secret-eval" in bob_browser.dom(f"{api}/web/jobs/{bobs}")
    assert "Not found" in bob_browser.dom(f"{api}/web/jobs/{running}")

    admin_browser = Browser(chromium, "oscar", oscar, "oscar")
    admin_browser.dom(as_user("oscar", api, oscar, "web")["url"])
    admin = admin_browser.dom(f"{api}/web/admin")
    assert "Audit trail" in admin and "web.login" in admin and "alice" in admin and link["url"].split("t=")[1] not in admin
    assert bobs in admin_browser.dom(f"{api}/web/")
    admin_browser.screenshot(f"{api}/web/admin", "admin")

    cookie = session_cookie(api, "alice", alice)
    paths = {"cluster": "/web/", "queues": "/web/queues", "jobs": "/web/jobs", "job": f"/web/jobs/{waiting}"}
    times = render_times(api, cookie, paths)
    print("\nweb view render times (server ms, wall ms):", json.dumps({k: [round(s, 1), round(w, 1)] for k, (s, w) in times.items()}))
    print(f"screenshots: {ARTIFACTS}")
    for ref, home, user in ((running, alice, "alice"), (waiting, alice, "alice"), (bobs, bob, "bob")):
        as_user(user, api, home, "cancel", ref)
