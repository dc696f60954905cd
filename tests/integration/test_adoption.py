"""Plain sbatch, adopted (issue 13): users' sbatch jobs in the managed partition wait for metasched's policy.

On the dev cluster (``managed`` = t4n[1-2], ``deploy/slurm/job_submit.lua``) with one real
``metasched serve --managed-partitions managed`` on PostgreSQL, in strict share order
(``fair_share_horizon_s: null``: the default merges tenants by submit time, which would not
show shares). Two msbatch blockers, one per tenant, fill the partition — submitted by metasched
itself, they are never held. Then bob (tenant-b, Fairshare 30) and, a second later, alice
(tenant-a, 70) submit plain ``sbatch -p managed`` jobs that each need the whole partition: both
are held (JobHeldUser) and adopted, with the Slurm job's owner, account and request; after the
blockers, alice's job starts first although bob's was submitted first, each runs under its own
Slurm id and sacct shows it under its user's name. A third held job that alice scancels ends
its metasched job as cancelled, and it never ran.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable, Iterator
from datetime import datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from meta.model.states import JobState
from meta.store.models import AdoptedJob, Job
from tests.identity.conftest import installed_cli, shared_folder  # noqa: F401 - fixtures
from tests.identity.test_jobs_as_users import Serve, alice_dir, serve  # noqa: F401 - fixtures
from tests.identity.users import Call, run_one

pytestmark = pytest.mark.slurm
# time limits of 2 minutes: a gang's hold (an ms-hold reservation, meta/cycle/actuate/holds.py) planned to start
# within a minute starts at once on its nodes, and would keep Slurm from starting the job placed there before it
WHOLE_PARTITION = ("-p", "managed", "-N", "2", "--gres=gpu:t4:4", "-t", "2")


@pytest.fixture
def managed(monkeypatch: pytest.MonkeyPatch, tmp_path: Path) -> Iterator[None]:
    """managed makes the next ``serve`` adopt in partition ``managed`` and take tenants strictly by share."""
    policy = tmp_path / "policy.yaml"
    policy.write_text("fair_share_horizon_s: null\n")
    monkeypatch.setenv("METASCHED_MANAGED_PARTITIONS", "managed")
    monkeypatch.setenv("METASCHED_POLICY_CONFIG", str(policy))
    yield


def wait_for(what: str, done: Callable[[], object], timeout_s: float = 120, why: Callable[[], str] | None = None) -> object:
    deadline = time.monotonic() + timeout_s
    while True:
        value = done()
        if value:
            return value
        assert time.monotonic() < deadline, f"timed out waiting for {what}" + (": " + why() if why else "")
        time.sleep(0.5)


def plain_sbatch(user: str, account: str, name: str, seconds: int) -> str:
    """plain_sbatch submits a job that needs the whole managed partition as ``user``; returns its Slurm id."""
    done = subprocess.run(
        ["runuser", "-u", user, "--", "sbatch", "--parsable", "-A", account, "-J", name, *WHOLE_PARTITION,
         "--chdir=/tmp", "-o", "/dev/null", "--wrap", f"sleep {seconds}"],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def squeue(slurm_id: str, fields: str) -> str:
    return subprocess.run(["squeue", "-h", "-j", slurm_id, "-o", fields], capture_output=True, text=True,
                          timeout=60).stdout.strip()  # fmt: skip


def sacct(slurm_id: str) -> dict[str, str]:
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", slurm_id, "-o", "JobID,User,Account,State,Start,NodeList"],
                         capture_output=True, text=True, timeout=60).stdout.strip()  # fmt: skip
    if not out:
        return {}
    keys = ("id", "user", "account", "state", "start", "nodes")
    return dict(zip(keys, out.splitlines()[0].split("|"), strict=True))


def adopted(served: Serve, slurm_id: str) -> Job | None:
    """adopted is the metasched job that adopted the Slurm job, if any."""
    with served.service.db.session() as session:
        return session.scalar(select(Job).join(AdoptedJob, AdoptedJob.job_id == Job.id)
                              .where(AdoptedJob.slurm_job_id == slurm_id))  # fmt: skip


def blocker(served: Serve, user: str, account: str) -> str:
    """blocker submits, through msbatch, a job holding one managed node for 40 s; returns its metasched id."""
    out = run_one(Call(user, ("--parsable", "-p", "managed", "-A", account, "-J", f"block-{user}", "-N", "1",
                              "--gres=gpu:t4:4", "-t", "2", "--wrap", "sleep 40"), prog="msbatch"),
                  served.api, Path("/tmp"))  # fmt: skip
    assert out.code == 0, out.stderr
    return out.stdout.strip()


def slurm_id_of(served: Serve, job: str) -> str:
    status = served.service.status(job)
    ids = [a.slurm_job_id for t in status.tasks for a in t.attempts if a.slurm_job_id]
    return ids[0] if ids else ""


def test_plain_sbatch_jobs_are_adopted_ordered_by_share_released_and_cancellable(
    managed: None, serve: Serve  # noqa: F811
) -> None:
    plain: list[str] = []
    try:
        blockers = [blocker(serve, "alice", "tenant-a"), blocker(serve, "bob", "tenant-b")]
        for job in blockers:  # metasched's own jobs in the managed partition are not held
            slurm_id = str(wait_for(f"{job} to run", lambda job=job: slurm_id_of(serve, job) if serve.service.status(
                job).state == JobState.RUNNING else "", why=lambda job=job: serve.why(job)))  # fmt: skip
            assert "metasched:adopt" not in subprocess.run(["scontrol", "-o", "show", "job", slurm_id],
                                                           capture_output=True, text=True, timeout=60).stdout
        plain.append(plain_sbatch("bob", "tenant-b", "plain-b", 5))
        time.sleep(1.5)
        plain.append(plain_sbatch("alice", "tenant-a", "plain-a", 5))
        plain.append(plain_sbatch("alice", "tenant-a", "plain-cancelled", 5))
        bob_id, alice_id, cancelled_id = plain

        for slurm_id, user, uid, tenant in ((bob_id, "bob", 2002, "tenant-b"), (alice_id, "alice", 2001, "tenant-a")):
            job = wait_for(f"Slurm job {slurm_id} to be adopted", lambda s=slurm_id: adopted(serve, s), timeout_s=30)
            assert isinstance(job, Job)
            assert (job.owner_uid, job.owner_gid, job.tenant, job.submitted_by) == (uid, uid, tenant, user)
            spec = serve.service.status(job.short_id)
            assert spec.state == JobState.PENDING  # the partition is full: it waits in metasched
            # squeue: pending, held, and the comment says why (metasched's reason, its job id)
            state, reason, comment = squeue(slurm_id, "%T|%r|%k").split("|", 2)
            assert (state, reason) == ("PENDING", "JobHeldUser")
            wait_for(f"{slurm_id}'s comment", lambda s=slurm_id, j=job: f"metasched job {j.short_id} waits" in squeue(
                s, "%k"), timeout_s=30)  # fmt: skip
            # a user may not release it around metasched
            release = subprocess.run(["runuser", "-u", user, "--", "scontrol", "release", slurm_id],
                                     capture_output=True, text=True, timeout=60)  # fmt: skip
            assert release.returncode != 0 and squeue(slurm_id, "%r") == "JobHeldUser"

        cancelled = wait_for("the third job to be adopted", lambda: adopted(serve, cancelled_id), timeout_s=30)
        assert isinstance(cancelled, Job)
        subprocess.run(["runuser", "-u", "alice", "--", "scancel", cancelled_id], check=True, timeout=60)
        wait_for("the scancel to cancel the metasched job",
                 lambda: serve.service.status(cancelled.short_id).state == JobState.CANCELLED, timeout_s=30)  # fmt: skip

        ended = {"COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"}
        for slurm_id in (bob_id, alice_id):
            wait_for(f"{slurm_id} to end in sacct", lambda s=slurm_id: sacct(s).get("state", "").split()[0:1] and
                     sacct(s)["state"].split()[0] in ended, timeout_s=150,
                     why=lambda: serve.log.read_text()[-3000:])  # fmt: skip
        bob, alice = sacct(bob_id), sacct(alice_id)
        assert (alice["id"], alice["user"], alice["account"], alice["state"]) == (alice_id, "alice", "tenant-a", "COMPLETED")
        assert (bob["id"], bob["user"], bob["account"], bob["state"]) == (bob_id, "bob", "tenant-b", "COMPLETED")
        assert alice["nodes"] == bob["nodes"] == "t4n[1-2]"
        # the higher-share tenant first, though bob submitted first
        assert datetime.fromisoformat(alice["start"]) < datetime.fromisoformat(bob["start"]), (alice, bob)
        for slurm_id in (bob_id, alice_id):
            job = adopted(serve, slurm_id)
            assert job is not None
            wait_for(f"{job.short_id} to succeed", lambda j=job: serve.service.status(j.short_id).state
                     == JobState.SUCCEEDED, timeout_s=60)  # fmt: skip
            (task,) = serve.service.status(job.short_id).tasks
            assert [a.slurm_job_id for a in task.attempts] == [slurm_id]  # released, never sbatch'ed again
        never_ran = sacct(cancelled_id)  # sacct's Start of a job cancelled while pending is the cancel time
        assert (never_ran["state"].split()[0], never_ran["nodes"]) == ("CANCELLED", "None assigned")
    finally:
        if plain:
            subprocess.run(["scancel", *plain], capture_output=True, timeout=30)
