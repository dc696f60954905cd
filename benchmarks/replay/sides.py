"""sides runs one side of a replay on the real dev cluster: plain ``sbatch``, or ``msbatch`` to a fresh ``metasched serve``."""

from __future__ import annotations

import os
import subprocess
import sys
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from benchmarks.replay import collect, serve
from benchmarks.replay.slice import ReplayJob
from benchmarks.replay.submit import MAX_LAG_S, as_user, shape_options, submit_all
from meta.store.db import Database

REPO = Path(__file__).resolve().parents[2]
LOCK = Path("/tmp/metasched-slurm-tests.lock")
CAPACITY_GPUS = 40


@dataclass(frozen=True)
class Clusters:
    """Clusters is where a side runs: plain sbatch's ``-M`` list, serve's ``--clusters``, and their GPUs."""

    plain: str | None = None  # sbatch/sacct -M (None: the default cluster)
    serve: str | None = None  # metasched serve --clusters
    gpus: int = CAPACITY_GPUS


ONE_CLUSTER = Clusters()
# emu and dev2 (deploy/devcluster up --second): 40 GPUs each, one slurmdbd
PAIR = Clusters("emu,dev2", "emu,dev2=/etc/slurm-dev2/slurm.conf", 2 * CAPACITY_GPUS)
# The run installs its own copy of the CLI from this tree (deploy/install-cli into a private
# prefix): the shared /usr/local/bin one may be reinstalled by a test mid-run, which failed
# submits in an earlier run.
CLI_PREFIX = Path("/opt/metasched-replay")
MSBATCH = CLI_PREFIX / "links" / "msbatch"
PERIOD_S = 2.0


def say(line: str) -> None:
    """say prints progress on stderr."""
    print(f"[replay {time.strftime('%H:%M:%S')}] {line}", file=sys.stderr, flush=True)


def install_cli() -> None:
    """install_cli installs the thin CLI from this tree into the run's private prefix."""
    env = {**os.environ, "METASCHED_PREFIX": str(CLI_PREFIX), "METASCHED_BIN_DIR": str(MSBATCH.parent)}
    (MSBATCH.parent).mkdir(parents=True, exist_ok=True)
    done = subprocess.run(
        [str(REPO / "deploy" / "install-cli")], cwd=REPO, env=env, capture_output=True, text=True
    )
    if done.returncode != 0:
        sys.exit(f"replay: deploy/install-cli failed: {done.stderr.strip()[-500:]}")


def run_side(
    jobs: list[ReplayJob], prefix: str, folder: Path, argv: Callable, pending: Callable[[], int] = lambda: 0,
    *, timeout: float, capacity_gpus: int = CAPACITY_GPUS, accounting: str | None = None,
) -> dict:
    """run_side submits, waits for every job to end and computes the side's figures (sacct -M ``accounting``)."""
    since = time.time()
    submitted = submit_all(jobs, prefix, argv, folder)
    names = {s.name for s in submitted if s.ok}
    rows = collect.wait_until_done(prefix, since, names, pending, timeout, accounting)
    figures = collect.figures(submitted, rows, capacity_gpus)
    figures["valid"] = figures["submit_lag_max_s"] <= MAX_LAG_S and not figures["submit_failed"]
    figures["submit_errors"] = sorted({s.output for s in submitted if not s.ok})[:5]
    return figures


def run_plain(
    jobs: list[ReplayJob], prefix: str, folder: Path, *, timeout: float, clusters: Clusters = ONE_CLUSTER
) -> dict:
    """run_plain runs the slice with plain ``sbatch`` (``-M`` the side's clusters) as the accounts' users."""
    where = ["-M", clusters.plain] if clusters.plain else []
    return run_side(jobs, prefix, folder,
                    lambda job, name: as_user(job, ["sbatch", "--parsable", *where, *shape_options(job, name)]),
                    timeout=timeout, capacity_gpus=clusters.gpus, accounting=clusters.plain)  # fmt: skip


def run_metasched(
    jobs: list[ReplayJob], prefix: str, state: Path, db: Database, policy_config: Path | None, *,
    timeout: float, capacity_gpus: int | None = None, clusters: Clusters = ONE_CLUSTER,
) -> dict:
    """run_metasched runs the slice through a fresh ``metasched serve`` on ``db`` and adds its CPU time."""
    state.mkdir(mode=0o755)
    served = serve.start(db, state, PERIOD_S, policy_config, clusters.serve)
    try:
        cpu_before = served.cpu_s()
        env = {"METASCHED_API": served.api}
        figures = run_side(
            jobs, prefix, state.parent,
            lambda job, name: as_user(job, [str(MSBATCH), "--parsable", *shape_options(job, name)], env),
            served.pending_tasks, timeout=timeout, capacity_gpus=capacity_gpus or clusters.gpus,
            accounting=clusters.plain,
        )  # fmt: skip
        figures["daemon_cpu_s"] = served.cpu_s() - cpu_before
    finally:
        serve.stop(served)
    return figures
