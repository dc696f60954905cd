"""The one gate for tests that need the real Slurm dev cluster: up, skip with a reason, or fail.

CI sets METASCHED_REQUIRE_SLURM=1 so a broken cluster fails the run instead of skipping it.
"""

from __future__ import annotations

import functools
import os
import shutil
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[1]


@functools.cache
def cluster_problem() -> str:
    """cluster_problem says why the dev cluster cannot be used ('' when it is up); asked once per session."""
    if os.geteuid() != 0:
        return "deploy/devcluster needs root"
    if shutil.which("sbatch") is None:
        return "Slurm is not installed"
    script = REPO / "deploy" / "devcluster"
    try:
        status = subprocess.run([str(script), "status"], capture_output=True, text=True, timeout=60,
                                stdin=subprocess.DEVNULL)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`{script} status` failed: {exc}"
    return "" if status.returncode == 0 else f"`deploy/devcluster status` exited {status.returncode}"


def cluster_required() -> bool:
    """cluster_required tells whether Slurm tests must fail, not skip, without a cluster (CI sets it)."""
    return os.environ.get("METASCHED_REQUIRE_SLURM") == "1"


def require_cluster() -> None:
    """require_cluster returns when the dev cluster is up; otherwise skips, or fails when it is required."""
    problem = cluster_problem()
    if not problem:
        return
    message = f"the dev Slurm cluster is not up ({problem}); run `deploy/devcluster up`"
    if cluster_required():
        pytest.fail(f"METASCHED_REQUIRE_SLURM=1 but {message}", pytrace=False)
    pytest.skip(message)
