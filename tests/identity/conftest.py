"""One real ``metasched serve`` for the identity tests: PostgreSQL, MUNGE and the dev cluster's associations.

The service is the production wiring (``MungeAuthenticator`` against the host's munged, named
with ``--munge-socket``; ``AssociationCache`` over the real ``sacctmgr``/``scontrol``). Its Slurm
folder holds only those two commands: the cycle cannot launch, list or cancel Slurm jobs, so
submitted jobs stay pending (the matrix changes them through the API only) and no other test's
Slurm jobs are touched. The API socket is 0666 in a 0755 folder, so every dev user reaches it;
the users run the CLI that ``deploy/install-cli`` installed.
"""

from __future__ import annotations

import os
import shutil
import signal
import stat
import subprocess
import sys
import tempfile
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path

import pytest

from meta.service.api import Service
from meta.store.db import Database
from meta.store.reset import truncate_all
from tests.harness import accounting_slurm_bin
from tests.identity.users import BIN_DIR, request

REPO = Path(__file__).resolve().parents[2]
MUNGE_SOCKET = Path("/run/munge/munge.socket.2")


@dataclass(frozen=True)
class Served:
    """Served is the running service: its socket, the API address, a shared folder, the secrets root, the store."""

    socket: Path
    folder: Path
    secrets: Path
    service: Service

    @property
    def api(self) -> str:
        """api is METASCHED_API for the users."""
        return f"unix://{self.socket}"


@pytest.fixture(scope="session")
def installed_cli(slurm_cluster: None) -> Path:
    """installed_cli runs deploy/install-cli (fast when nothing changed) and returns the installed metasched."""
    done = subprocess.run([str(REPO / "deploy" / "install-cli")], capture_output=True, text=True, timeout=600)
    assert done.returncode == 0, done.stderr
    assert (BIN_DIR / "metasched").exists() and (BIN_DIR / "msbatch").exists(), done.stderr
    return BIN_DIR / "metasched"


@pytest.fixture
def shared_folder() -> Iterator[Path]:
    """shared_folder is a 0755 folder under /tmp (pytest's own are 0700: the users could not enter them)."""
    folder = Path(tempfile.mkdtemp(prefix="metasched-identity-", dir="/tmp"))
    folder.chmod(0o755)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


@pytest.fixture
def served(installed_cli: Path, pg_database: Database, shared_folder: Path) -> Iterator[Served]:
    """served runs ``metasched serve`` on PostgreSQL with the production authentication until the test ends."""
    if not stat.S_ISSOCK(os.stat(MUNGE_SOCKET).st_mode):
        pytest.fail(f"munged is not running ({MUNGE_SOCKET}); run deploy/devcluster up", pytrace=False)
    truncate_all(pg_database)
    sock = shared_folder / "run" / "api.sock"
    secrets = shared_folder / "secrets"
    argv = [
        sys.executable, "-c", "from cli.main import main; main()", "--db", pg_database.url, "serve",
        "--state-dir", str(shared_folder / "state"), "--metrics-port", "0", "--period", "2",
        "--slurm-bin-dir", str(accounting_slurm_bin(shared_folder)), "--api-socket", str(sock), "--api-listen", "off",
        "--secrets-root", str(secrets), "--munge-socket", str(MUNGE_SOCKET), "--log-level", "WARNING",
    ]  # fmt: skip
    proc = subprocess.Popen(argv, cwd=REPO, stdout=subprocess.DEVNULL, stderr=subprocess.PIPE, text=True)
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert proc.poll() is None, proc.communicate()[1]
            assert time.monotonic() < deadline, "the API socket never appeared"
            time.sleep(0.1)
        assert request(sock, "GET", "/healthz") == (200, {"status": "ok"})
        assert stat.S_IMODE(os.stat(sock).st_mode) == 0o666 and stat.S_IMODE(os.stat(sock.parent).st_mode) == 0o755
        yield Served(sock, shared_folder, secrets, Service(pg_database))
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            _, err = proc.communicate(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            _, err = proc.communicate()
    assert proc.returncode == 0, err[-4000:]
