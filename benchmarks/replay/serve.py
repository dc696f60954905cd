"""serve runs the one ``metasched serve`` the metasched side of the replay submits to.

It is started as a user site would run it: its own state folder, the API on a Unix socket the
users can reach, MUNGE for identity, Slurm's account shares synced into tenant weights, the
shipped default policy and period. Its CPU time (its own and its reaped children's, i.e. the
sbatch/squeue/sacct calls) is read from /proc so the report can show what scheduling cost.
"""

from __future__ import annotations

import os
import signal
import subprocess
import sys
import time
from dataclasses import dataclass
from pathlib import Path

from sqlalchemy import func, select

from meta.model.states import TERMINAL_TASK_STATES
from meta.store.db import Database
from meta.store.models import Task

REPO = Path(__file__).resolve().parents[2]
MUNGE_SOCKET = "/run/munge/munge.socket.2"


@dataclass
class Served:
    """Served is a running ``metasched serve``: its process, API address and store."""

    process: subprocess.Popen
    socket: Path
    db: Database

    @property
    def api(self) -> str:
        """api is METASCHED_API for the users."""
        return f"unix://{self.socket}"

    def cpu_s(self) -> float:
        """cpu_s is the serve's CPU seconds so far, its reaped children's included."""
        fields = Path(f"/proc/{self.process.pid}/stat").read_text().rsplit(")", 1)[1].split()
        ticks = sum(int(value) for value in fields[11:15])  # utime stime cutime cstime
        return ticks / os.sysconf("SC_CLK_TCK")

    def pending_tasks(self) -> int:
        """pending_tasks counts tasks metasched has not ended yet."""
        with self.db.session() as session:
            return session.scalar(
                select(func.count()).select_from(Task).where(Task.state.not_in(TERMINAL_TASK_STATES))
            )


def start(
    db: Database, folder: Path, period_s: float = 2.0, policy_config: Path | None = None, clusters: str | None = None
) -> Served:
    """start runs ``metasched serve`` on ``db`` (over ``clusters``, serve --clusters) and waits for its API."""
    socket = folder / "run" / "api.sock"
    argv = [
        sys.executable, "-c", "from cli.main import main; main()", "--db", db.url, "serve",
        "--state-dir", str(folder / "state"), "--metrics-port", "0", "--period", str(period_s),
        "--api-socket", str(socket), "--api-listen", "off", "--munge-socket", MUNGE_SOCKET,
        "--log-level", "WARNING",
    ]  # fmt: skip
    if policy_config is not None:
        argv += ["--policy-config", str(policy_config.resolve())]
    if clusters:
        argv += ["--clusters", clusters]
    log = (folder / "serve.log").open("w")
    process = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 60
    while not socket.exists():
        if process.poll() is not None or time.monotonic() > deadline:
            raise RuntimeError(f"metasched serve did not start; see {folder / 'serve.log'}")
        time.sleep(0.2)
    return Served(process, socket, db)


def stop(served: Served) -> None:
    """stop ends the serve with SIGTERM (SIGKILL after a minute)."""
    served.process.send_signal(signal.SIGTERM)
    try:
        served.process.wait(timeout=60)
    except subprocess.TimeoutExpired:
        served.process.kill()
        served.process.wait()
