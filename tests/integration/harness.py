"""DaemonHarness: drive the real daemon code period by period against real Slurm, and inspect Slurm."""

from __future__ import annotations

import subprocess
import time
from collections import defaultdict
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.launch_plan import LaunchSettings
from meta.cycle.reconcile import ReconcileSettings
from meta.model.spec import spec_from_dict
from meta.model.states import JobState
from meta.service.api import Service
from meta.service.http import create_app
from meta.service.server import ApiServer, Listen
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.runner import CommandRunner
from slurm_bridge.tags import tag_key
from tenants.associations import AssociationCache
from tenants.munge import MungeAuthenticator


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


def serve_api(service: Service, socket_path: Path, secrets_root: Path) -> ApiServer:
    """serve_api serves the API with the production wiring (MUNGE, Slurm's associations) on a Unix socket."""
    associations = AssociationCache(CliSlurmClient(CommandRunner()))
    app = create_app(service, MungeAuthenticator(), associations.principal_for, secrets_root=secrets_root)
    server = ApiServer(app, Listen(socket_path=socket_path))
    server.start()
    return server


class DaemonHarness:
    """DaemonHarness owns a service, an in-process daemon with test-sized timeouts and the API its jobs call."""

    def __init__(self, service: Service, tmp_path: Path, bin_dir: str | None = None, **config: object):
        self.service = service
        self.tmp_path = tmp_path
        self.client = CliSlurmClient(CommandRunner(bin_dir=bin_dir))
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
