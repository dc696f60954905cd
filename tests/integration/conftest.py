"""Fixtures for tests against the real dev Slurm cluster (deploy/devcluster) and PostgreSQL."""

from __future__ import annotations

import fcntl
import os
import shutil
import subprocess
from collections.abc import Iterator
from pathlib import Path

import pytest

from tests.integration.harness import DaemonHarness

REPO = Path(__file__).resolve().parents[2]
_LOCK = Path("/tmp/metasched-slurm-tests.lock")


def cluster_problem() -> str:
    """cluster_problem says why the dev cluster cannot be used ('' when it is up)."""
    if os.geteuid() != 0:
        return "deploy/devcluster needs root"
    if shutil.which("sbatch") is None:
        return "Slurm is not installed"
    status = subprocess.run(
        [str(REPO / "deploy" / "devcluster"), "status"],
        capture_output=True,
        text=True,
        timeout=60,
        stdin=subprocess.DEVNULL,
    )
    return "" if status.returncode == 0 else f"`deploy/devcluster status` exited {status.returncode}"


@pytest.fixture(scope="session")
def slurm_cluster() -> None:
    """slurm_cluster requires the dev cluster: skip with the reason, or fail when CI requires it."""
    problem = cluster_problem()
    if not problem:
        return
    message = f"the dev Slurm cluster is not up ({problem}); run `deploy/devcluster up`"
    if os.environ.get("METASCHED_REQUIRE_SLURM") == "1":
        pytest.fail(f"METASCHED_REQUIRE_SLURM=1 but {message}", pytrace=False)
    pytest.skip(message)


@pytest.fixture
def slurm_exclusive(slurm_cluster: None) -> Iterator[None]:
    """slurm_exclusive serialises tests that run a daemon: a daemon cancels jobs it does not own."""
    with _LOCK.open("w") as handle:
        fcntl.flock(handle, fcntl.LOCK_EX)
        yield
        fcntl.flock(handle, fcntl.LOCK_UN)


@pytest.fixture
def harness(slurm_exclusive: None, pg_service, tmp_path: Path) -> Iterator[DaemonHarness]:
    """harness is an in-process daemon over a fresh PostgreSQL store and the real Slurm cluster."""
    h = DaemonHarness(pg_service, tmp_path)
    yield h
    h.close()
