"""What the tests on the real pair (emu and dev2, issue 26) share: the daemon over both, dev2's switches, job probes.

``daemon_over_pair`` is an in-process daemon over emu and dev2 on PostgreSQL (conftest's
``two_clusters`` fixture), with another dev2 slurm.conf or dark grace when a test asks. The
helpers stop and start dev2's daemons (its slurmctld, its slurmds) by their pid files and
``deploy/devcluster up --second``, and read what metasched and Slurm say about a job.
"""

from __future__ import annotations

import os
import signal
import subprocess
import time
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from sqlalchemy import select

from meta.model.states import AttemptState
from meta.serve.slurm_access import slurm_client
from meta.service.api import Service
from meta.store.models import Job, Task, TaskReason
from tests.harness import DaemonHarness
from tests.integration.second_cluster import DEVCLUSTER, SECOND, SECOND_CONF, require_second_cluster

FIRST = "emu"  # ClusterName in deploy/slurm/slurm.conf
SECOND_RUN = Path("/run/slurm-dev2")  # dev2's pid files: slurmctld.pid, slurmd-<node>.pid

LOST_GRACE_S = 15.0  # short, so that an outage outlasts it
DARK_GRACE_S = 20.0  # how long dev2 may be dark before its inference partitions are replayed

WHOLE_H100 = {"cpus": 1, "memory": "1G", "gpus": 8, "gpu_type": "h100"}
WHOLE_A100 = {"cpus": 1, "memory": "1G", "gpus": 8, "gpu_type": "a100"}


def _spec(name: str, **fields: object) -> dict[str, object]:
    """_spec is a small job of tenant-a: defaults overridden by ``fields``."""
    spec: dict[str, object] = {"kind": "evaluation", "name": name, "tenant": "tenant-a", "time_limit": "5m",
                               "resources": {"cpus": 1, "memory": "1G"}, "command": "sleep 2"}  # fmt: skip
    return spec | fields


@contextmanager
def daemon_over_pair(pg_service: Service, tmp_path: Path, second_conf: str = SECOND_CONF,
                     dark_grace_s: float = DARK_GRACE_S, entries: list[str] | None = None) -> Iterator[DaemonHarness]:  # fmt: skip
    """daemon_over_pair is an in-process daemon over emu and dev2 (reached through ``second_conf``); it cleans dev2 up.

    ``entries``: the ``clusters`` setting instead (e.g. ``["auto"]``: dev2 found in slurmdbd, reached with -M).
    """
    require_second_cluster()
    client = slurm_client(entries or [FIRST, f"{SECOND}={second_conf}"], bin_dir=None, observer=None)
    harness = DaemonHarness(pg_service, tmp_path, client=client, lost_grace_s=LOST_GRACE_S, dark_grace_s=dark_grace_s)
    try:
        yield harness
    finally:
        harness.close()
        client.close()  # type: ignore[attr-defined] - a ClusterSet: stops its prober
        _start_dev2()  # a test that stopped part of dev2 leaves it running again
        _cancel_ours_on_dev2()


def _cancel_ours_on_dev2() -> None:
    """_cancel_ours_on_dev2 cancels every metasched job left in dev2 (its comment carries a metasched tag)."""
    ours = subprocess.run(["squeue", "-M", SECOND, "-h", "-o", "%i|%k"], capture_output=True, text=True, timeout=30)
    rows = [line.split("|", 1) for line in ours.stdout.splitlines() if "|" in line]
    ids = [job_id for job_id, comment in rows if job_id.isdigit() and "metasched:" in comment]
    if ids:
        subprocess.run(["scancel", "-M", SECOND, *ids], capture_output=True, timeout=30)


def _start_dev2() -> None:
    """_start_dev2 starts whatever of dev2 is not running (deploy/devcluster up --second is idempotent)."""
    done = subprocess.run([str(DEVCLUSTER), "up", "--second"], capture_output=True, text=True, timeout=120)
    assert done.returncode == 0, done.stdout + done.stderr


def _stop_pids(pids: list[int], what: str, timeout_s: float = 30) -> None:
    """_stop_pids sends SIGTERM to each pid and waits until all are gone."""
    for pid in pids:
        os.kill(pid, signal.SIGTERM)
    deadline = time.monotonic() + timeout_s
    while time.monotonic() < deadline:
        if not [pid for pid in pids if Path(f"/proc/{pid}").exists()]:
            return
        time.sleep(0.2)
    raise AssertionError(f"{what} did not stop in {timeout_s:.0f}s")


def _stop_dev2_controller() -> None:
    """_stop_dev2_controller stops dev2's slurmctld only: its slurmds go on running their jobs."""
    _stop_pids([int((SECOND_RUN / "slurmctld.pid").read_text().strip())], "dev2's slurmctld")


def _stop_dev2_slurmds() -> list[str]:
    """_stop_dev2_slurmds stops every slurmd of dev2 (its controller runs on) and returns their nodes."""
    files = sorted(SECOND_RUN.glob("slurmd-*.pid"))
    assert files, f"no slurmd pid files in {SECOND_RUN}"
    _stop_pids([int(path.read_text().strip()) for path in files], "dev2's slurmds")
    return [path.name.removeprefix("slurmd-").removesuffix(".pid") for path in files]


def _attempts(harness: DaemonHarness, job: str) -> list:
    """_attempts are the job's attempts (every task's), oldest first per task."""
    return [a for t in harness.service.status(job).tasks for a in t.attempts]


def _running_in_slurm(harness: DaemonHarness, job: str) -> Callable[[], bool]:
    """_running_in_slurm is true once the job's latest attempt runs in Slurm (launched, with a Slurm job id)."""

    def check() -> bool:
        attempts = _attempts(harness, job)
        return bool(attempts) and attempts[-1].state == AttemptState.RUNNING.value and bool(attempts[-1].slurm_job_id)

    return check


def _nodes(harness: DaemonHarness, job: str) -> set[str]:
    """_nodes are the nodes any attempt of the job ran on."""
    return {node for a in _attempts(harness, job) for node in (a.nodes or [])}


def _reason(harness: DaemonHarness, job: str) -> tuple[str, str]:
    """_reason is the last cycle's typed reason of the job's task (code, message)."""
    with harness.service.db.session() as session:
        row = session.execute(select(TaskReason.code, TaskReason.message).join(Task, Task.id == TaskReason.task_id)
                              .join(Job, Job.id == Task.job_id).where(Job.short_id == job)).one()  # fmt: skip
    return row.code, row.message


def _sacct_fields(cluster: str, job_id: str, fields: str) -> list[str]:
    """_sacct_fields is the job's allocation record in the cluster's accounting ([] until it is there)."""
    out = subprocess.run(["sacct", "-M", cluster, "-n", "-P", "-X", "-j", job_id, "-o", fields],
                         capture_output=True, text=True, timeout=60).stdout  # fmt: skip
    return out.strip().splitlines()[0].split("|") if out.strip() else []


def _slurm_state(cluster: str, job_id: str) -> str:
    """_slurm_state is the job's state in the cluster's accounting ('' until it is there)."""
    return next(iter(_sacct_fields(cluster, job_id, "State")), "")


def _timed_periods(h: DaemonHarness, seconds: float, done: Callable[[], bool] = lambda: False) -> list[float]:
    """_timed_periods runs daemon periods for ``seconds`` (or until ``done()``) and returns each one's length."""
    lengths = []
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        started = time.monotonic()
        h.daemon.period()
        lengths.append(time.monotonic() - started)
        if done():
            break
        time.sleep(h.config.period_s)
    return lengths


def _figures(lengths: list[float]) -> str:
    """_figures is ``n, median, p99, max`` of period lengths, for print()."""
    ordered = sorted(lengths)
    return (f"{len(ordered)} periods: median {ordered[len(ordered) // 2]:.2f} s, p99 {_p99(ordered):.2f} s, "
            f"max {ordered[-1]:.2f} s")  # fmt: skip


def _p99(lengths: list[float]) -> float:
    """_p99 is the 99th percentile (nearest rank) of period lengths."""
    ordered = sorted(lengths)
    return ordered[max(0, -(-99 * len(ordered) // 100) - 1)]
