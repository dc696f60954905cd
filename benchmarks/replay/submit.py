"""submit hands the slice to one side at the trace's arrival times, as its users, and times each call.

Each job is submitted by the dev cluster user of its account (alice for tenant-a, bob for
tenant-b) with ``runuser``, so plain Slurm and metasched both see the real user and account. A
small thread pool keeps the loop on schedule when one call is slow; the lag between a job's
planned arrival and the moment its command started is recorded, and a run whose lag exceeds
``MAX_LAG_S`` is marked invalid by the report (the side would be judged on late arrivals).
"""

from __future__ import annotations

import shlex
import subprocess
import time
from collections.abc import Callable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass
from pathlib import Path

from benchmarks.replay.slice import ReplayJob

MAX_LAG_S = 5.0
USER_OF = {"tenant-a": "alice", "tenant-b": "bob"}
Argv = Callable[[ReplayJob, str], list[str]]


@dataclass(frozen=True, slots=True)
class Submitted:
    """Submitted is one submit command's outcome."""

    job: ReplayJob
    name: str
    planned: float  # wall-clock time of the planned arrival
    started: float
    latency_s: float
    ok: bool
    output: str


def job_name(prefix: str, job: ReplayJob) -> str:
    """job_name is the Slurm job name both sides use: the run prefix and the slice index."""
    return f"{prefix}-{job.index:04d}"


def shape_options(job: ReplayJob, name: str) -> list[str]:
    """shape_options are the sbatch options both sides pass: account, name, nodes, GPUs, time."""
    return [
        "-A", job.account, "-J", name, "-N", str(job.nodes), f"--gres=gpu:{job.gpus_per_node}",
        "-t", str(job.time_limit_min), "-o", "/dev/null", "--wrap", f"sleep {job.duration_s}",
    ]  # fmt: skip


def as_user(job: ReplayJob, command: Sequence[str], env: dict[str, str] | None = None) -> list[str]:
    """as_user runs ``command`` as the account's user (``runuser``), with extra environment if any."""
    pairs = [f"{key}={value}" for key, value in (env or {}).items()]
    return ["runuser", "-u", USER_OF[job.account], "--", "env", *pairs, *command]


def submit_all(
    jobs: list[ReplayJob], prefix: str, argv: Argv, cwd: Path, workers: int = 4
) -> list[Submitted]:
    """submit_all submits every job at its arrival time (from now) and returns what each call did."""
    origin = time.time() + 1.0
    with ThreadPoolExecutor(max_workers=workers) as pool:
        futures = []
        for job in jobs:
            planned = origin + job.arrival_s
            _sleep_until(planned)
            futures.append(pool.submit(_submit_one, job, job_name(prefix, job), planned, argv, cwd))
        return [future.result() for future in futures]


def _sleep_until(moment: float) -> None:
    """_sleep_until sleeps until the wall clock reaches ``moment`` (at once if it has)."""
    delay = moment - time.time()
    if delay > 0:
        time.sleep(delay)


def _submit_one(job: ReplayJob, name: str, planned: float, argv: Argv, cwd: Path) -> Submitted:
    """_submit_one runs one submit command and times it."""
    command = argv(job, name)
    started = time.time()
    done = subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=120)
    latency = time.time() - started
    output = (done.stdout.strip() if done.returncode == 0 else done.stderr.strip())[-300:]
    if done.returncode != 0:
        output = f"{shlex.join(command)}: {output}"
    return Submitted(job, name, planned, started, latency, done.returncode == 0, output)
