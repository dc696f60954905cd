"""msqueue/mscancel against squeue/scancel on the dev cluster, as alice with the installed CLI (issue 13).

One real ``metasched serve`` (as in tests/identity/test_jobs_as_users.py). alice submits with
msbatch and with plain sbatch from a folder of her home; on the same running jobs, msqueue's
columns (-o and -O) say what squeue's say (name, user, account, partition, state, nodes, node list, time
limit); the plain sbatch job is squeue's only. mscancel cancels by id and by name (the Slurm
jobs end CANCELLED), and alice's own plain ``scancel`` of a metasched job cancels the job: it
is not lost and relaunched, and the audit names alice.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest

from meta.model.states import JobState
from meta.store import audit
from tests.identity.conftest import installed_cli, shared_folder  # noqa: F401 - fixtures
from tests.identity.test_jobs_as_users import Serve, alice_dir, serve  # noqa: F401 - fixtures
from tests.identity.users import Call, Outcome, run_one

pytestmark = pytest.mark.slurm
COLUMNS = "%j|%u|%a|%P|%t|%D|%N|%l"  # the same fields in both programs


def as_alice(served: Serve, cwd: Path, prog: str, *args: str) -> Outcome:
    """as_alice runs the installed ``prog`` as alice in ``cwd`` with a clean environment."""
    return run_one(Call("alice", tuple(args), prog=prog), served.api, cwd)


def slurm(*argv: str, user: str = "alice") -> str:
    """slurm runs a Slurm command as ``user`` and returns its standard output."""
    done = subprocess.run(["runuser", "-u", user, "--", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def wait_for(what: str, done: Callable[[], object], timeout_s: float = 120) -> object:
    deadline = time.monotonic() + timeout_s
    while True:
        value = done()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)


def msbatch(served: Serve, cwd: Path, name: str) -> str:
    """msbatch submits a 5-minute sleep named ``name`` and returns its metasched id."""
    out = as_alice(served, cwd, "msbatch", "--parsable", "-A", "tenant-a", "-J", name, "-t", "5", "--wrap", "sleep 300")
    assert out.code == 0, out.stderr
    return out.stdout.strip()


def running_slurm_id(served: Serve, cwd: Path, job: str) -> str:
    """running_slurm_id waits until msqueue shows the job running and returns its Slurm id."""

    def shown() -> str | None:
        out = as_alice(served, cwd, "msqueue", "--json", "-j", job)
        rows = out.json() if out.code == 0 else []
        return rows[0]["slurm_job_ids"][0] if rows and rows[0]["st"] == "R" else None  # type: ignore[index]

    return str(wait_for(f"{job} to run", shown))


def sacct_state(slurm_id: str) -> str:
    return subprocess.run(["sacct", "-n", "-X", "-P", "-j", slurm_id, "-o", "State"], capture_output=True,
                          text=True, timeout=60).stdout.strip()  # fmt: skip


def test_msqueue_and_squeue_agree_and_cancels_are_cancels(serve: Serve, alice_dir: Path) -> None:  # noqa: F811
    viewed = msbatch(serve, alice_dir, "viewed")
    plain = slurm("sbatch", "--parsable", "-A", "tenant-a", "-J", "plain", "-t", "5", "-o", "/dev/null",
                  "--wrap", "sleep 300")  # fmt: skip
    try:
        slurm_id = running_slurm_id(serve, alice_dir, viewed)
        wait_for("the plain job to run", lambda: slurm("squeue", "-h", "-j", plain, "-o", "%t") == "R")
        # the same running job, the same columns; squeue's default header
        mine = as_alice(serve, alice_dir, "msqueue", "-h", "-j", viewed, "-o", COLUMNS).stdout.strip()
        assert mine == slurm("squeue", "-h", "-j", slurm_id, "-o", COLUMNS)
        assert mine.startswith("viewed|alice|tenant-a|") and "|R|1|" in mine
        long_fmt = "Name:12,UserName:8,Account:10,Partition:6,StateCompact:.3,NumNodes:.4,NodeList:10,TimeLimit:.8"
        mine_long = as_alice(serve, alice_dir, "msqueue", "-h", "-j", viewed, "-O", long_fmt).stdout.rstrip()
        assert mine_long == slurm("squeue", "-h", "-j", slurm_id, "-O", long_fmt).rstrip()  # -O: the same columns
        header = as_alice(serve, alice_dir, "msqueue").stdout.splitlines()[0].split()
        assert header == slurm("squeue").splitlines()[0].split()
        listed = as_alice(serve, alice_dir, "msqueue", "--me", "-h", "-o", "%i %j").stdout.split()
        assert viewed in listed and "plain" not in listed  # plain sbatch jobs are squeue's only

        cancelled = as_alice(serve, alice_dir, "mscancel", viewed)
        assert (cancelled.code, cancelled.stderr) == (0, "")
        wait_for("mscancel by id", lambda: sacct_state(slurm_id) == "CANCELLED by 0")  # the daemon's scancel

        named = msbatch(serve, alice_dir, "by-name")
        named_id = running_slurm_id(serve, alice_dir, named)
        assert as_alice(serve, alice_dir, "mscancel", "-n", "by-name").code == 0
        wait_for("mscancel by name", lambda: sacct_state(named_id).startswith("CANCELLED"))
        wait_for("the job to be cancelled", lambda: serve.service.status(named).state == JobState.CANCELLED)

        owned = msbatch(serve, alice_dir, "scancelled")
        owned_id = running_slurm_id(serve, alice_dir, owned)
        slurm("scancel", owned_id)  # alice's own plain scancel
        wait_for("the scancel to cancel the job", lambda: serve.service.status(owned).state == JobState.CANCELLED,
                 timeout_s=90)  # fmt: skip
        time.sleep(5)  # a relaunch would have happened within a few periods
        status = serve.service.status(owned)
        assert status.state == JobState.CANCELLED and len(status.tasks[0].attempts) == 1
        assert status.tasks[0].attempts[0].state == "cancelled"
        with serve.service.db.session() as session:
            lines = [e for e in audit.read(session) if e.action == "job.cancel" and e.subject == owned]
        assert [(e.actor, e.detail.get("via")) for e in lines] == [("alice", "scancel")]
    finally:
        subprocess.run(["scancel", plain], capture_output=True, timeout=30)
