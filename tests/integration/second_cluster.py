"""The second dev cluster's gate (issue 26): tests that need dev2 skip without it, or fail when it is required.

`deploy/devcluster up --second` (as root) starts it; METASCHED_REQUIRE_SECOND_CLUSTER=1 (CI) turns
its absence into a failure.
"""

from __future__ import annotations

import functools
import os
import subprocess
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
DEVCLUSTER = REPO / "deploy" / "devcluster"
SECOND = "dev2"
SECOND_CONF = "/etc/slurm-dev2/slurm.conf"


@functools.cache
def _second_problem() -> str:
    """Say why the second cluster cannot be used ('' when `deploy/devcluster status --second` exits 0)."""
    if os.geteuid() != 0:
        return "deploy/devcluster needs root"
    try:
        status = subprocess.run([str(DEVCLUSTER), "status", "--second"], capture_output=True, text=True, timeout=60,
                                stdin=subprocess.DEVNULL)  # fmt: skip
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"`deploy/devcluster status --second` failed: {exc}"
    return "" if status.returncode == 0 else f"`deploy/devcluster status --second` exited {status.returncode}"


def require_second_cluster() -> None:
    """require_second_cluster skips the calling test with the reason dev2 is not up, or fails when it is required."""
    problem = _second_problem()
    if not problem:
        return
    message = f"the second dev cluster {SECOND} is not up ({problem}); run `deploy/devcluster up --second`"
    if os.environ.get("METASCHED_REQUIRE_SECOND_CLUSTER") == "1":
        pytest.fail(f"METASCHED_REQUIRE_SECOND_CLUSTER=1 but {message}", pytrace=False)
    pytest.skip(message)


