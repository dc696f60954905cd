"""The daemon harness of the real-Slurm suites (tests/integration, tests/faults, tests/identity).

Three parts, one module: Slurm facts read with the real commands (sacct, squeue) and the checks
built on them (I1–I6, duplicates, unsettled attempts); ``DaemonHarness``, the daemon's code run
in-process period by period; ``ServeProcess``, a ``metasched serve`` subprocess to kill -9,
SIGSTOP and restart, with the waits for it to lead, cycle and finish jobs.
"""

from __future__ import annotations

import os
import re
import shutil
import signal
import subprocess
import sys
import time
from collections import defaultdict
from collections.abc import Callable, Iterable
from dataclasses import dataclass
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.invariants import check_invariants
from meta.cycle.reconcile import ReconcileSettings
from meta.model.durations import utcnow
from meta.model.spec import spec_from_dict
from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from meta.service.http import create_app
from meta.service.server import ApiServer, Listen
from meta.store.models import Attempt, CycleRecord, LeaderLease
from slurm_bridge.client import SlurmClient
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.inventory import build_inventory
from slurm_bridge.runner import CommandRunner
from slurm_bridge.tags import parse_tag, tag_key
from tenants.associations import AssociationCache
from tenants.munge import MungeAuthenticator
from tests.conftest import pg_url

REPO = Path(__file__).resolve().parents[1]
# the sbatch wrapper the subprocess daemons use by default: slowed, timed out or late on request
FAKEBIN = REPO / "tests" / "integration" / "fakebin"
FINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
UNSETTLED = {AttemptState.CREATED.value, AttemptState.LAUNCHING.value, AttemptState.LAUNCH_UNKNOWN.value}
# a daemon's job is ms-<attempt uuid>; other tests submit ms-test-... by hand, not this store's business
_DAEMON_NAME = re.compile(r"^ms-[0-9a-f]{8}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{4}-[0-9a-f]{12}$")


# --- Slurm facts and the checks on them ------------------------------------------------------


@dataclass(frozen=True)
class SlurmRecord:
    """SlurmRecord is one sacct allocation line."""

    job_id: str
    name: str
    state: str
    exit_code: str
    account: str
    alloc_tres: str
    nodes: str
    comment: str = ""

    @property
    def key(self) -> str:
        """key is ``ms-<attempt>`` for a metasched job (read from its comment tag), else the job's name."""
        return tag_key(self.name, self.comment)


def sacct_records(since: str = "now-2hours") -> list[SlurmRecord]:
    """sacct_records reads the accounting records of all users' job allocations."""
    out = subprocess.run(
        [
            "sacct",
            "-n",
            "-P",
            "-X",
            "-a",
            "-S",
            since,
            "-o",
            "JobID,JobName%100,State,ExitCode,Account,AllocTRES,NodeList,Comment%200",
        ],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    records = []
    for line in out.splitlines():
        parts = line.split("|")
        if len(parts) == 8:
            records.append(SlurmRecord(*parts))
    return records


def sacct_wait(names: set[str], timeout_s: float = 20.0) -> dict[str, SlurmRecord]:
    """sacct_wait polls sacct until it holds a record for every key (``ms-<attempt>`` or a plain name)."""
    deadline = time.monotonic() + timeout_s
    while True:
        by_name = {r.key: r for r in sacct_records()}
        if names <= set(by_name) or time.monotonic() > deadline:
            return by_name
        time.sleep(0.5)


def squeue_keys() -> dict[str, str]:
    """squeue_keys maps each active job's key (``ms-<attempt>`` from a metasched tag, else its name) to its id."""
    out = subprocess.run(
        ["squeue", "-h", "-t", "PD,R,CG,CF", "-o", "%i|%k|%j"],
        capture_output=True,
        text=True,
        check=True,
        timeout=60,
    ).stdout
    keys = {}
    for line in out.splitlines():
        job_id, _, rest = line.strip().partition("|")
        job_comment, _, name = rest.partition("|")
        if job_id:
            keys[tag_key(name, job_comment)] = job_id
    return keys


def squeue_names() -> list[str]:
    """squeue_names lists the keys of jobs Slurm still has active (a metasched job as ``ms-<attempt>``)."""
    return list(squeue_keys())


def slurm_jobs_per_attempt(attempt_ids: set[str]) -> dict[str, list[str]]:
    """slurm_jobs_per_attempt maps each attempt to the Slurm job ids sacct holds for it."""
    found: dict[str, list[str]] = defaultdict(list)
    for record in sacct_records():
        if record.key.startswith("ms-") and record.key[3:] in attempt_ids:
            found[record.key[3:]].append(record.job_id)
    return found


def daemon_job_names() -> set[str]:
    """daemon_job_names are the active Slurm jobs a daemon launched (``ms-<attempt uuid>``, from their tags)."""
    return {name for name in squeue_names() if _DAEMON_NAME.match(name)}


def invariant_violations(service: Service, grace_s: float = 60.0) -> list[str]:
    """invariant_violations runs check_invariants (I1–I6) with Slurm's active jobs and nodes."""
    nodes = build_inventory(CliSlurmClient().sinfo()).nodes
    with service.db.session() as session:
        return check_invariants(session, slurm_active_names=daemon_job_names(), nodes=nodes, grace_s=grace_s)


def attempts_of(service: Service, job: str) -> list:
    """attempts_of lists every attempt of every task of a job (views)."""
    return [a for t in service.status(job).tasks for a in t.attempts]


def slurm_jobs_of(attempt_ids: set[str]) -> dict[str, list[str]]:
    """slurm_jobs_of waits for sacct to show every attempt, then maps attempt -> Slurm job ids."""
    sacct_wait({f"ms-{a}" for a in attempt_ids}, timeout_s=30)
    return slurm_jobs_per_attempt(attempt_ids)


def duplicates(per_attempt: dict[str, list[str]]) -> int:
    """duplicates counts Slurm jobs beyond the first per attempt."""
    return sum(len(ids) - 1 for ids in per_attempt.values())


def unsettled_attempts(service: Service) -> list[str]:
    """unsettled_attempts are attempts left in created/launching/launch_unknown."""
    with service.db.session() as session:
        return [
            f"{a.id} {a.state}" for a in session.scalars(select(Attempt).where(Attempt.state.in_(UNSETTLED)))
        ]


def cancel_daemon_jobs() -> None:
    """cancel_daemon_jobs cancels every Slurm job a daemon of this store may have left behind."""
    ids = [job_id for key, job_id in squeue_keys().items() if key in daemon_job_names()]
    if ids:
        subprocess.run(["scancel", *ids], capture_output=True, timeout=30)


def sacct_has(slurm_job_id: str, timeout_s: float = 30) -> None:
    """sacct_has waits until sacct holds the job with its tag.

    slurmdbd is asynchronous, and a just-cancelled job is briefly recorded without it.
    """
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        out = subprocess.run(
            ["sacct", "-n", "-X", "-P", "-j", slurm_job_id, "-o", "Comment%200"],
            capture_output=True,
            text=True,
        ).stdout
        if parse_tag("", out.strip()) is not None:
            return
        time.sleep(0.5)


# --- the daemon in-process --------------------------------------------------------------------


def accounting_slurm_bin(folder: Path) -> Path:
    """accounting_slurm_bin is ``folder/slurm-bin`` with the real sacctmgr and scontrol only: a serve given it
    reads associations and SlurmUser but its cycle cannot touch jobs (no squeue, sbatch or scancel)."""
    bin_dir = folder / "slurm-bin"
    bin_dir.mkdir()
    for name in ("sacctmgr", "scontrol"):
        found = shutil.which(name)
        assert found, f"{name} is not installed"
        (bin_dir / name).symlink_to(found)
    return bin_dir


def serve_api(service: Service, socket_path: Path, secrets_root: Path) -> ApiServer:
    """serve_api serves the API with the production wiring (MUNGE, Slurm's associations) on a Unix socket."""
    associations = AssociationCache(CliSlurmClient(CommandRunner()))
    app = create_app(service, MungeAuthenticator(), associations.principal_for, secrets_root=secrets_root)
    server = ApiServer(app, Listen(socket_path=socket_path))
    server.start()
    return server


class DaemonHarness:
    """DaemonHarness owns a service, an in-process daemon with test-sized timeouts and the API its jobs call."""

    def __init__(self, service: Service, tmp_path: Path, bin_dir: str | None = None,
                 client: SlurmClient | None = None, **config: object):  # fmt: skip
        self.service = service
        self.tmp_path = tmp_path
        self.client = client or CliSlurmClient(CommandRunner(bin_dir=bin_dir))
        # the jobs' `metasched commit` / `checkpoint report` reach the service here, as the daemon's would
        self.api = serve_api(service, Path(str(config.get("api_socket", tmp_path / "api.sock"))), tmp_path / "secrets")
        self.config = DaemonConfig(
            period_s=0.5,
            leader_lease_s=30.0,
            holder="test-harness",
            submit_timeout_s=float(config.get("submit_timeout_s", 20.0)),
            launch=LaunchSettings(
                log_dir=str(tmp_path / "logs"),
                grace_s=int(config.get("grace_s", 5)),
                api_address=self.api.addresses()[0],
            ),
            reconcile=ReconcileSettings(
                unknown_window_s=float(config.get("unknown_window_s", 4.0)),
                lost_grace_s=float(config.get("lost_grace_s", 60.0)),
                dark_grace_s=float(config.get("dark_grace_s", 600.0)),
            ),
        )
        self.daemon = Daemon(service.db, self.client, self.config)

    def submit(self, data: dict[str, object], key: str | None = None) -> str:
        """submit stores a job from a dict spec and returns its short id."""
        return self.service.submit(spec_from_dict(data), key).job.short_id

    def run_until(
        self, done: Callable[[], bool], timeout_s: float, between: Callable[[], None] | None = None
    ) -> int:
        """run_until runs daemon periods until ``done()`` or the timeout; returns periods run."""
        deadline = time.monotonic() + timeout_s
        periods = 0
        while time.monotonic() < deadline:
            self.daemon.period()
            periods += 1
            if between:
                between()
            if done():
                return periods
            time.sleep(self.config.period_s)
        raise AssertionError(f"not done after {timeout_s:.0f}s ({periods} periods)")

    def state(self, job: str) -> JobState:
        """state is a job's derived state."""
        return self.service.status(job).state

    def all_finished(self, jobs: list[str]) -> Callable[[], bool]:
        """all_finished is a predicate: every job succeeded, failed or was cancelled."""
        final = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
        return lambda: all(self.state(job) in final for job in jobs)

    def close(self) -> None:
        """close stops the daemon's launch pool, cancels whatever the test left running in Slurm and stops the API."""
        self.daemon.close_launches()
        self.api.stop()
        ids = [job_id for key, job_id in squeue_keys().items() if key.startswith("ms-")]
        if ids:
            subprocess.run(["scancel", *ids], capture_output=True, timeout=30)


# --- the daemon as a subprocess ---------------------------------------------------------------


class ServeProcess:
    """ServeProcess runs one ``metasched serve`` replica as a subprocess (kill -9, SIGSTOP, restart)."""

    def __init__(
        self,
        tmp_path: Path,
        holder: str,
        *,
        lease_s: float = 3.0,
        submit_timeout_s: float = 2.0,
        bin_dir: Path | None = FAKEBIN,
        env: dict[str, str] | None = None,
        extra: list[str] | None = None,
    ):
        self.tmp_path = tmp_path
        self.holder = holder
        self.lease_s = lease_s
        self.submit_timeout_s = submit_timeout_s
        self.bin_dir = bin_dir
        self.env = env or {}
        self.extra = extra or []
        # one socket per ServeProcess, kept across restarts and renames: jobs it launched keep
        # calling it there (METASCHED_API), as they would /run/metasched/api.sock
        self.socket_path = tmp_path / f"api-{holder}.sock"
        self.proc: subprocess.Popen[bytes] | None = None
        self.incarnations = 0
        self.logs: list[Path] = []

    def argv(self) -> list[str]:
        """argv is the serve command line."""
        argv = [
            sys.executable, "-c", "from cli.main import main; main()",
            "--db", pg_url(), "serve",
            "--period", "0.5",
            "--leader-lease", str(self.lease_s),
            "--metrics-port", "0",
            "--holder", self.holder,
            "--log-dir", str(self.tmp_path / "logs"),
            "--unknown-window", "3",
            "--lost-grace", "60",
            "--grace", "5",
            "--submit-timeout", f"{self.submit_timeout_s:g}",
            # each replica its own API listeners: two on one host must not fight over the defaults
            "--api-socket", str(self.socket_path),
            "--api-listen", "127.0.0.1:0",
        ]  # fmt: skip
        if self.bin_dir is not None:
            argv += ["--slurm-bin-dir", str(self.bin_dir)]
        return argv + self.extra

    def start(self) -> datetime:
        """start launches a new incarnation and returns when."""
        self.incarnations += 1
        log = self.tmp_path / f"serve-{self.holder}-{self.incarnations}.log"
        self.logs.append(log)
        env = dict(os.environ)
        # the fake sbatch's control file is the test's to give: never one left in the caller's shell
        env.pop("METASCHED_FAKE_SBATCH_CONTROL", None)
        env.update(self.env)
        at = utcnow()
        with log.open("wb") as out:
            self.proc = subprocess.Popen(self.argv(), cwd=REPO, stdout=out, stderr=subprocess.STDOUT, env=env)
        return at

    def alive(self) -> bool:
        """alive tells whether the current incarnation runs."""
        return self.proc is not None and self.proc.poll() is None

    def signal(self, signum: int) -> None:
        """signal sends a signal to the current incarnation."""
        assert self.proc is not None
        os.kill(self.proc.pid, signum)

    def kill(self) -> None:
        """kill sends SIGKILL (after SIGCONT, in case it was stopped) and reaps the process."""
        if self.proc is not None and self.proc.poll() is None:
            try:
                os.kill(self.proc.pid, signal.SIGCONT)
                os.kill(self.proc.pid, signal.SIGKILL)
            except ProcessLookupError:
                pass
        if self.proc is not None:
            self.proc.wait(timeout=30)
        self.proc = None

    def log_text(self) -> str:
        """log_text is every incarnation's log, concatenated."""
        return "\n".join(p.read_text(errors="replace") for p in self.logs if p.exists())

    def tail(self, lines: int = 40) -> str:
        """tail is the end of the current incarnation's log."""
        if not self.logs or not self.logs[-1].exists():
            return ""
        return "\n".join(self.logs[-1].read_text(errors="replace").splitlines()[-lines:])

    def launched_by_actuator(self) -> set[str]:
        """launched_by_actuator lists attempts whose sbatch returned to an incarnation (from every log)."""
        return set(re.findall(r"launched attempt (\S+) as Slurm job", self.log_text()))


def wait_for(predicate: Callable[[], bool], timeout_s: float, what: str, poll_s: float = 0.25) -> float:
    """wait_for polls until the predicate holds and returns the seconds it took (AssertionError on timeout)."""
    started = time.monotonic()
    while True:
        try:
            if predicate():
                return time.monotonic() - started
        except Exception:  # noqa: BLE001 - e.g. the store is restarting: poll again
            pass
        if time.monotonic() - started > timeout_s:
            raise AssertionError(f"timed out after {timeout_s:.0f}s waiting for {what}")
        time.sleep(poll_s)


def lease(service: Service) -> LeaderLease | None:
    """lease reads the leader lease row (detached)."""
    with service.db.session() as session:
        row = session.scalar(select(LeaderLease))
        if row is not None:
            session.expunge(row)
        return row


def wait_leading(service: Service, daemon: ServeProcess, since: datetime, timeout_s: float = 30) -> float:
    """wait_leading waits until ``daemon`` has renewed the lease after ``since``; returns the seconds waited."""

    def leading() -> bool:
        assert daemon.alive(), f"daemon {daemon.holder} died:\n{daemon.tail()}"
        row = lease(service)
        return row is not None and row.holder == daemon.holder and row.renewed_at > since

    try:
        return wait_for(leading, timeout_s, f"{daemon.holder} to lead", poll_s=0.05)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{daemon.tail()}") from None


def wait_cycle(service: Service, daemon: ServeProcess, since: datetime, timeout_s: float = 30) -> float:
    """wait_cycle waits until a scheduling cycle was committed after ``since`` (right before its launches)."""

    def cycled() -> bool:
        assert daemon.alive(), f"daemon {daemon.holder} died:\n{daemon.tail()}"
        with service.db.session() as session:
            return bool(session.scalar(select(func.count()).where(CycleRecord.at > since)))

    try:
        return wait_for(cycled, timeout_s, f"{daemon.holder} to cycle", poll_s=0.05)
    except AssertionError as exc:
        raise AssertionError(f"{exc}\n{daemon.tail()}") from None


def wait_jobs(
    service: Service, jobs: list[str], timeout_s: float, daemons: Iterable[ServeProcess] = ()
) -> None:
    """wait_jobs waits until every job is final, failing early if a daemon died on its own."""
    deadline = time.monotonic() + timeout_s
    watched = list(daemons)
    while True:
        for d in watched:
            assert d.alive(), f"daemon {d.holder} died on its own:\n{d.tail()}"
        try:
            states = {job: service.status(job).state for job in jobs}
        except Exception:  # noqa: BLE001 - the store may be restarting
            states = {}
        if states and all(s in FINAL for s in states.values()):
            return
        if time.monotonic() > deadline:
            pending = {j: s.value for j, s in states.items() if s not in FINAL}
            tails = "\n".join(d.tail() for d in watched)
            raise AssertionError(f"jobs not final after {timeout_s:.0f}s: {pending}\n{tails}")
        time.sleep(0.5)
