"""A metasched tag in another user's job is not the attempt's job (issue 22), on the dev cluster as real users.

squeue shows every job's comment, so bob reads alice's attempt id and submits plain ``sbatch``
jobs whose ``--comment`` is ``metasched:site=<site>:attempt=<alice's attempt>``: one that completes at once,
one that keeps running. The real daemon (``metasched serve``, PostgreSQL, MUNGE) must not take
either as alice's: her attempt keeps running (not ended by bob's COMPLETED job), bob's running
job is neither cancelled as a duplicate while her attempt is live nor as an orphan once it ended,
and each of bob's jobs is audited once as ``job.tag.spoofed`` with its Slurm id and uid.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from pathlib import Path

import pytest
from sqlalchemy import select

from meta.model.states import AttemptState
from meta.store.models import Attempt, AuditEvent
from meta.store.site import stored_site_id
from tests.identity.conftest import installed_cli, shared_folder  # noqa: F401 - fixtures
from tests.identity.test_jobs_as_users import (  # noqa: F401 - fixtures
    Serve,
    alice_dir,
    as_user,
    run_long_job_as_alice,
    serve,
    slurm_field,
    wait_for,
)

pytestmark = pytest.mark.slurm
BOB_UID = 2002
PLAIN = ("-A", "tenant-b", "-c", "1", "--mem=100M", "-t", "2", "--chdir=/tmp", "-o", "/dev/null")


def sbatch_as_bob(comment: str, command: str) -> str:
    """sbatch_as_bob submits a plain sbatch job as bob with ``comment``; returns its Slurm id."""
    done = subprocess.run(
        ["runuser", "-u", "bob", "--", "sbatch", "--parsable", *PLAIN, f"--comment={comment}", "--wrap", command],
        capture_output=True, text=True, timeout=60,
    )  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def state_of(slurm_id: str) -> str:
    """state_of is the job's state as accounting records it ('' until slurmdbd has it)."""
    return slurm_field(["sacct", "-n", "-X", "-P", "-j", slurm_id, "-o", "State"])


def attempt_state(served: Serve, attempt_id: str) -> str:
    with served.service.db.session() as session:
        row = session.get(Attempt, attempt_id)
        assert row is not None
        return row.state


def spoof_rows(served: Serve, attempt_id: str) -> list[tuple[str, str, int | None]]:
    """spoof_rows are the audit rows of jobs spoofing the attempt's tag: (attempt, Slurm job id, uid).

    Earlier runs' jobs of bob's, still in the accounting window, name attempts no longer stored:
    they are audited too, under their own attempt ids.
    """
    with served.service.db.session() as session:
        rows = session.scalars(
            select(AuditEvent).where(AuditEvent.action == "job.tag.spoofed", AuditEvent.subject == attempt_id)
        )
        return sorted((r.subject, r.detail["slurm_job_id"], r.detail["uid"]) for r in rows)


def hold_for(seconds: float, check: Callable[[], None]) -> None:
    """hold_for checks ``check`` every half second for ``seconds`` (several of the daemon's 1 s periods)."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        check()
        time.sleep(0.5)


def test_bobs_jobs_with_alices_tag_neither_end_her_attempt_nor_get_cancelled(
    serve: Serve,  # noqa: F811
    alice_dir: Path,  # noqa: F811
) -> None:
    job_id, attempt = run_long_job_as_alice(serve, alice_dir)
    tag = slurm_field(["squeue", "-h", "-j", str(attempt.slurm_job_id), "-o", "%k"], user="bob")
    site = stored_site_id(serve.service.db)
    assert tag == f"metasched:site={site}:attempt={attempt.id}"  # what any user reads off squeue, and copies

    bob_jobs: list[str] = []
    try:
        bob_jobs.append(sbatch_as_bob(tag, "true"))  # completes at once
        bob_jobs.append(sbatch_as_bob(tag, "sleep 110"))  # keeps running with alice's tag
        done, running = bob_jobs
        wait_for("bob's first job to complete", lambda: state_of(done) == "COMPLETED", timeout_s=90)
        assert slurm_field(["sacct", "-n", "-X", "-P", "-j", done, "-o", "User"]) == "bob"

        def alive() -> None:
            assert attempt_state(serve, attempt.id) == AttemptState.RUNNING.value, serve.why(job_id)
            assert not state_of(running).startswith("CANCELLED"), serve.why(job_id)

        hold_for(8, alive)  # bob's COMPLETED job is in squeue and sacct the whole time
        wait_for("the spoofs to be audited", lambda: len(spoof_rows(serve, attempt.id)) == 2, timeout_s=30)
        assert spoof_rows(serve, attempt.id) == sorted((attempt.id, slurm_id, BOB_UID) for slurm_id in bob_jobs)

        # alice cancels: her attempt ends, and bob's job with its tag is no orphan of metasched's
        assert as_user("alice", serve, alice_dir, "cancel", job_id).code == 0
        wait_for("alice's attempt to end", lambda: attempt_state(serve, attempt.id) == AttemptState.CANCELLED.value,
                 timeout_s=60, why=lambda: serve.why(job_id))  # fmt: skip
        assert state_of(str(attempt.slurm_job_id)).startswith("CANCELLED")
        hold_for(6, lambda: None)
        assert not state_of(running).startswith("CANCELLED"), serve.why(job_id)
        assert len(spoof_rows(serve, attempt.id)) == 2  # each audited once
    finally:
        subprocess.run(["scancel", *bob_jobs], capture_output=True, timeout=30)
