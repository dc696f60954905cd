"""Shared pieces of the fault suite: the profile, a ``metasched serve`` subprocess, counts and checks.

The profile (``METASCHED_FAULT_PROFILE``) only changes how many trials each scenario runs:
``short`` (the default, what CI runs) keeps the whole suite well under 8 minutes, ``long`` is
what ``deploy/fault-suite`` runs. Every scenario prints one ``FAULTS`` line with its counts and,
when ``METASCHED_FAULT_REPORT`` names a file, appends the same numbers there as JSON.
"""

from __future__ import annotations

import json
import math
import os
import signal
import subprocess
import sys
import time
from collections.abc import Callable, Iterable
from datetime import datetime
from pathlib import Path

from sqlalchemy import select

from meta.cycle.invariants import check_invariants
from meta.model.durations import utcnow
from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from meta.store.models import Attempt, LeaderLease
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.inventory import build_inventory
from tests.conftest import pg_url
from tests.integration.harness import sacct_wait, slurm_jobs_per_attempt, squeue_keys, squeue_names

REPO = Path(__file__).resolve().parents[2]
FAKEBIN = REPO / "tests" / "integration" / "fakebin"
FINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
UNSETTLED = {AttemptState.CREATED.value, AttemptState.LAUNCHING.value, AttemptState.LAUNCH_UNKNOWN.value}


def profile() -> str:
    """profile is ``short`` (default) or ``long``."""
    value = os.environ.get("METASCHED_FAULT_PROFILE", "short").strip().lower() or "short"
    if value not in ("short", "long"):
        raise ValueError(f"METASCHED_FAULT_PROFILE must be short or long, not {value!r}")
    return value


def trials(short: int, long: int) -> int:
    """trials is the number of trials a scenario runs in the current profile."""
    return long if profile() == "long" else short


def seed_of(name: str) -> int:
    """seed_of is the random seed of a scenario: ``METASCHED_FAULT_SEED`` replays a run."""
    raw = os.environ.get("METASCHED_FAULT_SEED")
    return int(raw) if raw else time.time_ns() % 1_000_000


def percentile(values: Iterable[float], p: float) -> float | None:
    """percentile is the nearest-rank percentile (None for no values)."""
    data = sorted(values)
    if not data:
        return None
    rank = max(1, math.ceil(p / 100.0 * len(data)))
    return data[rank - 1]


def report(scenario: str, **counts: object) -> dict[str, object]:
    """report prints one summary line for a scenario (and appends it to $METASCHED_FAULT_REPORT)."""
    line: dict[str, object] = {"scenario": scenario, "profile": profile()}
    for key, value in counts.items():
        if isinstance(value, list | tuple) and key.endswith("_s"):
            values = [float(v) for v in value]
            line[f"{key[:-2]}_p50_s"] = _round(percentile(values, 50))
            line[f"{key[:-2]}_p99_s"] = _round(percentile(values, 99))
            line[f"{key[:-2]}_n"] = len(values)
        else:
            line[key] = _round(value) if isinstance(value, float) else value
    print("\nFAULTS " + " ".join(f"{k}={v}" for k, v in line.items()), flush=True)
    target = os.environ.get("METASCHED_FAULT_REPORT")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
    return line


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


# --- Slurm facts and invariants ---------------------------------------------------------------


def daemon_job_names() -> set[str]:
    """daemon_job_names are the active Slurm jobs a daemon launched (``ms-<attempt uuid>``, from their tags)."""
    return {n for n in squeue_names() if n.startswith("ms-") and len(n) == 39}


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


def cancel_daemon_jobs() -> None:
    """cancel_daemon_jobs cancels every Slurm job a daemon of this store may have left behind."""
    ids = [job_id for key, job_id in squeue_keys().items() if key in daemon_job_names()]
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
        bin_dir: Path | None = FAKEBIN,
        env: dict[str, str] | None = None,
        extra: list[str] | None = None,
    ):
        self.tmp_path = tmp_path
        self.holder = holder
        self.lease_s = lease_s
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
            "--submit-timeout", "2",
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
        env = dict(os.environ, **self.env)
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


def small_eval(name: str, tenant: str = "tenant-a", command: str = "sleep 2") -> dict[str, object]:
    """small_eval is a 1-CPU evaluation job that fits anywhere."""
    return {
        "kind": "evaluation",
        "name": name,
        "tenant": tenant,
        "resources": {"cpus": 1, "memory": "1G"},
        "time_limit": "5m",
        "command": command,
    }


def inference(
    name: str, output: Path, partitions: int, command: str, tenant: str = "tenant-b"
) -> dict[str, object]:
    """inference is a CPU-only batch inference job of ``partitions`` partitions writing to ``output``."""
    return {
        "kind": "inference",
        "name": name,
        "tenant": tenant,
        "partitions": partitions,
        "resources": {"cpus": 1, "memory": "1G"},
        "output": str(output),
        "time_limit": "5m",
        "retry": {"max_attempts": 5, "backoff": 0},
        "command": command,
    }


# --- inference outputs ------------------------------------------------------------------------


def metasched(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """metasched runs the CLI against the test store (``--db``) and returns the completed process."""
    argv = [sys.executable, "-c", "from cli.main import main; main()", "--db", pg_url(), *args]
    return subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {}))
    )


def outputs_of(job: str) -> dict[str, object]:
    """outputs_of is ``metasched outputs JOB --json``."""
    done = metasched("outputs", job, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def output_problems(service: Service, job: str, partitions: int) -> list[str]:
    """output_problems checks one visible output per partition, from its final attempt, checksums matching."""
    import hashlib

    manifest = outputs_of(job)
    problems = []
    parts = manifest["partitions"]
    if len(parts) != partitions:
        problems.append(f"{job}: {len(parts)} partitions in the manifest, expected {partitions}")
    final = {t.name: t.attempts[-1] for t in service.status(job).tasks}
    for part in parts:
        name = part["name"]
        if not part["attempt"]:
            problems.append(f"{job}/{name}: no committed output")
            continue
        last = final.get(name)
        if last is None or part["attempt"] != last.id or last.state != AttemptState.SUCCEEDED:
            problems.append(
                f"{job}/{name}: committed by {part['attempt']}, final attempt is {last and last.id}"
            )
        if last is not None and part["fencing_token"] != last.fencing_token:
            problems.append(f"{job}/{name}: committed token {part['fencing_token']} != {last.fencing_token}")
        root = Path(part["manifest"]["root"])
        if not part["manifest"]["files"]:
            problems.append(f"{job}/{name}: empty manifest")
        for entry in part["manifest"]["files"]:
            path = root / entry["path"]
            if not path.is_file():
                problems.append(f"{job}/{name}: {path} is missing")
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != entry["sha256"] or path.stat().st_size != entry["size"]:
                problems.append(f"{job}/{name}: {path} does not match its manifest checksum")
    return problems
