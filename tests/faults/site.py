"""The site of ``deploy/site`` for the network scenarios: its gate, its store, replicas in the heads, the login CLI.

- ``require_site()``: the scenarios skip with the reason when ``deploy/site status`` is not up,
  unless ``METASCHED_REQUIRE_SITE=1`` (then they fail). They are not in CI's default run.
- ``site_database()``: the site's PostgreSQL (in ms-db, reached at 10.77.0.20:5433), its schema
  dropped, migrated and given the *fence audit* once per session: triggers that record, with
  the server's clock, every row written under an epoch older than the lease row's (attempts,
  cycles, decisions) and every change of epoch. A stale leader's write that PostgreSQL accepted
  would be there; none may be.
- ``HeadServe``: one ``metasched serve`` replica inside a head's namespace, with the site's
  SLURM_CONF, its API on the head's address (port 9465) and that address as ``--job-api``.
- ``login()``: the installed thin CLI as a user on the login host, over TCP with MUNGE.
"""

from __future__ import annotations

import functools
import json
import os
import secrets
import shutil
import subprocess
import sys
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import text

from meta.service.api import Service
from meta.store.db import Database
from meta.store.migrate import upgrade
from meta.store.reset import truncate_all
from tests.faults.network import API_PORT, ENDPOINTS, Network
from tests.harness import ServeProcess
from tests.identity.users import Call, Outcome, argv_of

REPO = Path(__file__).resolve().parents[2]
SITE = REPO / "deploy" / "site"
SITE_SLURM_CONF = "/run/metasched-site/slurm/slurm.conf"
LOGIN_TIMEOUT_S = 90.0

FENCE_AUDIT_SQL = """
CREATE TABLE IF NOT EXISTS net_fence_audit (
    id bigserial PRIMARY KEY, tbl text NOT NULL, epoch integer NOT NULL, current_epoch integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE TABLE IF NOT EXISTS net_lease_log (
    id bigserial PRIMARY KEY, holder text NOT NULL, epoch integer NOT NULL,
    at timestamptz NOT NULL DEFAULT clock_timestamp());
CREATE OR REPLACE FUNCTION net_fence_check() RETURNS trigger AS $$
DECLARE current integer;
BEGIN
    SELECT epoch INTO current FROM leader_lease WHERE name = 'scheduler';
    IF current IS NOT NULL AND NEW.epoch < current THEN
        INSERT INTO net_fence_audit (tbl, epoch, current_epoch) VALUES (TG_TABLE_NAME, NEW.epoch, current);
    END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
CREATE OR REPLACE FUNCTION net_lease_change() RETURNS trigger AS $$
BEGIN
    IF TG_OP = 'INSERT' OR NEW.epoch <> OLD.epoch THEN
        INSERT INTO net_lease_log (holder, epoch) VALUES (NEW.holder, NEW.epoch);
    END IF;
    RETURN NEW;
END $$ LANGUAGE plpgsql;
DROP TRIGGER IF EXISTS net_fence_attempts ON attempts;
CREATE TRIGGER net_fence_attempts BEFORE INSERT ON attempts FOR EACH ROW EXECUTE FUNCTION net_fence_check();
DROP TRIGGER IF EXISTS net_fence_cycles ON cycles;
CREATE TRIGGER net_fence_cycles BEFORE INSERT ON cycles FOR EACH ROW EXECUTE FUNCTION net_fence_check();
DROP TRIGGER IF EXISTS net_fence_decisions ON decisions;
CREATE TRIGGER net_fence_decisions BEFORE INSERT ON decisions FOR EACH ROW EXECUTE FUNCTION net_fence_check();
DROP TRIGGER IF EXISTS net_lease_epochs ON leader_lease;
CREATE TRIGGER net_lease_epochs AFTER INSERT OR UPDATE ON leader_lease FOR EACH ROW EXECUTE FUNCTION net_lease_change();
"""


# --- the gate ---------------------------------------------------------------------------------


@functools.cache
def site_problem() -> str:
    """site_problem says why the site cannot be used ('' when ``deploy/site status`` passes); asked once per session."""
    if os.geteuid() != 0:
        return "the site's namespaces need root"
    try:
        done = subprocess.run([str(SITE), "status"], capture_output=True, text=True, timeout=120, stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`deploy/site status` failed: {exc}"
    if done.returncode == 0:
        return ""
    failed = [line for line in done.stdout.splitlines() if line.startswith("FAIL")]
    return "; ".join(failed) or f"`deploy/site status` exited {done.returncode}"


def require_site() -> None:
    """require_site returns when the scenarios are asked for and the site is up; otherwise skips (fails under METASCHED_REQUIRE_SITE=1).

    They run on demand only (``deploy/fault-suite`` sets METASCHED_NETWORK_FAULTS=1): each takes
    minutes, and CI's default run must not grow by them on a machine where a site happens to be up.
    """
    required = os.environ.get("METASCHED_REQUIRE_SITE") == "1"
    if not required and os.environ.get("METASCHED_NETWORK_FAULTS") != "1":
        pytest.skip("the network-fault scenarios run on demand: `deploy/site up && deploy/fault-suite -k network` "
                    "(or METASCHED_NETWORK_FAULTS=1)")
    problem = site_problem()
    if not problem:
        return
    message = f"the network-fault site is not up ({problem}); run `deploy/site up`"
    if required:
        pytest.fail(f"METASCHED_REQUIRE_SITE=1 but {message}", pytrace=False)
    pytest.skip(message)


def site_url() -> str:
    """site_url is the site store's URL (``deploy/site url``)."""
    return subprocess.run([str(SITE), "url"], capture_output=True, text=True, check=True, timeout=30).stdout.strip()


# --- the store --------------------------------------------------------------------------------


def fresh_site_database() -> Database:
    """fresh_site_database drops the site store's schema, migrates it and installs the fence audit."""
    url = site_url()
    database = Database(url)
    with database.engine.begin() as connection:
        connection.execute(text("DROP SCHEMA public CASCADE"))
        connection.execute(text("CREATE SCHEMA public"))
    upgrade(database.engine, url)
    with database.engine.begin() as connection:
        connection.execute(text(FENCE_AUDIT_SQL))
    return database


def empty_site(database: Database) -> Service:
    """empty_site empties the store and the fence audit and returns a service over it."""
    truncate_all(database)
    with database.engine.begin() as connection:
        connection.execute(text("TRUNCATE net_fence_audit, net_lease_log"))
    return Service(database)


@dataclass(frozen=True)
class LeaseChange:
    """LeaseChange is one change of epoch as the server saw it (its own clock)."""

    holder: str
    epoch: int
    at: datetime


def lease_changes(database: Database) -> list[LeaseChange]:
    """lease_changes are the epochs the lease row took, in order, with the server's time of each."""
    with database.engine.connect() as connection:
        rows = connection.execute(text("SELECT holder, epoch, at FROM net_lease_log ORDER BY id")).all()
    return [LeaseChange(r.holder, r.epoch, r.at) for r in rows]


def fence_violations(database: Database) -> list[str]:
    """fence_violations are the rows PostgreSQL accepted under an epoch older than the lease's (must be none)."""
    with database.engine.connect() as connection:
        rows = connection.execute(text("SELECT tbl, epoch, current_epoch, at FROM net_fence_audit ORDER BY id")).all()
    return [f"{r.tbl}: epoch {r.epoch} written at {r.at.isoformat()} while epoch {r.current_epoch} led" for r in rows]


def server_now(database: Database) -> datetime:
    """server_now is PostgreSQL's clock (the fence audit's)."""
    with database.engine.connect() as connection:
        return connection.execute(text("SELECT clock_timestamp()")).scalar_one()


def rows_after(database: Database, epoch: int, after: datetime) -> dict[str, int]:
    """rows_after counts rows stamped with ``epoch`` later than ``after`` (the writer's clock: same machine)."""
    with database.engine.connect() as connection:
        return {
            "attempts": connection.execute(text("SELECT count(*) FROM attempts WHERE epoch = :e AND created_at > :t"),
                                           {"e": epoch, "t": after}).scalar_one(),
            "cycles": connection.execute(text("SELECT count(*) FROM cycles WHERE epoch = :e AND at > :t"),
                                         {"e": epoch, "t": after}).scalar_one(),
        }


def live_attempts_per_task(database: Database) -> int:
    """live_attempts_per_task is the most live attempts any task has now (at most one, always)."""
    with database.engine.connect() as connection:
        most = connection.execute(text(
            "SELECT max(n) FROM (SELECT count(*) AS n FROM attempts WHERE state IN "
            "('created', 'launching', 'launch_unknown', 'running', 'stopping') GROUP BY task_id) AS live")).scalar()
    return int(most or 0)


def client_sessions(database: Database, address: str, since: datetime) -> int:
    """client_sessions counts the server's sessions from ``address`` that ran a statement after ``since`` (server clock)."""
    with database.engine.connect() as connection:
        return connection.execute(text("SELECT count(*) FROM pg_stat_activity WHERE client_addr = CAST(:a AS inet) "
                                       "AND state_change > :t"), {"a": address, "t": since}).scalar_one()


@pytest.fixture(scope="session")
def site_database() -> Iterator[Database]:
    """site_database is the site's store, migrated from an empty schema, with the fence audit."""
    require_site()
    database = fresh_site_database()
    yield database
    database.dispose()


@pytest.fixture
def site_service(site_database: Database) -> Service:
    """site_service is the API over the emptied site store."""
    return empty_site(site_database)


@pytest.fixture
def network() -> Iterator[Network]:
    """network makes faults between the site's hosts and heals every one of them, whatever happens."""
    net = Network()
    try:
        yield net
    finally:
        net.heal()


# --- replicas in the heads --------------------------------------------------------------------


def head_address(ns: str) -> str:
    """head_address is a head's address on the bridge."""
    return ENDPOINTS[ns].address


def head_api(ns: str) -> str:
    """head_api is the API address of the replica in head ``ns`` (what jobs and the login host call)."""
    return f"http://{head_address(ns)}:{API_PORT}"


class HeadServe(ServeProcess):
    """HeadServe runs one ``metasched serve`` replica inside a head's network namespace, against the site store."""

    def __init__(self, tmp_path: Path, ns: str, *, lease_s: float, period_s: float, submit_timeout_s: float = 10.0,
                 unknown_window_s: float = 5.0, extra: list[str] | None = None):
        """__init__ sets the replica's head, lease, period and Slurm timeouts."""
        super().__init__(tmp_path, ns, lease_s=lease_s, submit_timeout_s=submit_timeout_s, bin_dir=None, extra=extra)
        self.ns = ns
        self.period_s = period_s
        self.unknown_window_s = unknown_window_s

    def argv(self) -> list[str]:
        """argv is ``ip netns exec <head> env SLURM_CONF=<site> metasched serve ...`` (ip and env exec: one pid)."""
        address = head_address(self.ns)
        return [
            "ip", "netns", "exec", self.ns, "env", f"SLURM_CONF={SITE_SLURM_CONF}",
            sys.executable, "-c", "from cli.main import main; main()",
            "--db", site_url(), "serve",
            "--period", f"{self.period_s:g}",
            "--leader-lease", f"{self.lease_s:g}",
            "--metrics-port", "0",
            "--holder", self.holder,
            "--log-dir", str(self.tmp_path / "logs"),
            "--unknown-window", f"{self.unknown_window_s:g}",
            "--lost-grace", "60",
            "--grace", "5",
            "--submit-timeout", f"{self.submit_timeout_s:g}",
            "--api-socket", "off",  # everything over the network: jobs and the login host use TCP
            "--api-listen", f"{address}:{API_PORT}",
            "--job-api", head_api(self.ns),
            *self.extra,
        ]  # fmt: skip


# --- the login host ---------------------------------------------------------------------------


def login(user: str, api: str, cwd: Path, *args: str, timeout_s: float = LOGIN_TIMEOUT_S) -> Outcome:
    """login runs the installed thin CLI as ``user`` on the login host (ms-login) against ``api``."""
    argv = ["ip", "netns", "exec", "ms-login", *argv_of(Call(user, tuple(args)), api)]
    try:
        done = subprocess.run(argv, cwd=cwd, capture_output=True, text=True, timeout=timeout_s)
    except subprocess.TimeoutExpired as exc:
        return Outcome(124, "", f"(the test gave up after {timeout_s:.0f}s: {exc})\n")
    return Outcome(done.returncode, done.stdout, done.stderr)


def user_folder(user: str = "alice") -> Path:
    """user_folder makes a fresh folder in the user's home, as the user (jobs run and write there)."""
    folder = Path("/home") / user / f"ms-net-{secrets.token_hex(4)}"
    subprocess.run(["runuser", "-u", user, "--", "mkdir", "-m", "0755", str(folder)], check=True, timeout=30)
    return folder


def remove_folder(folder: Path) -> None:
    """remove_folder deletes a test's folder (root: the jobs' files are the user's)."""
    shutil.rmtree(folder, ignore_errors=True)


def write_spec(folder: Path, name: str, spec: dict[str, object]) -> str:
    """write_spec writes a job file (JSON, which YAML reads) readable by the folder's user; returns its name."""
    path = folder / f"{name}.json"
    path.write_text(json.dumps(spec))
    path.chmod(0o644)
    return path.name


def submit_as(user: str, api: str, folder: Path, spec: dict[str, object], key: str,
              timeout_s: float = LOGIN_TIMEOUT_S) -> tuple[Outcome, str | None]:
    """submit_as submits one job from the login host as ``user``; (outcome, job id or None)."""
    name = write_spec(folder, key.replace("/", "-"), spec)
    outcome = login(user, api, folder, "submit", "-f", name, "--key", key, "--json", timeout_s=timeout_s)
    job = None
    if outcome.code == 0:
        job = json.loads(outcome.stdout)["id"]
    return outcome, job
