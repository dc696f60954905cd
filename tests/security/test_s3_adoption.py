"""S3 (issue 22): a plain sbatch user is not adopted as another user in another tenant.

As written in the finding: bob (tenant-b) submits, with plain ``sbatch`` to partition
``managed``, a job whose name, script path, working folder and ``-o``/``-e`` paths contain
`` UserId=alice(2001) Account=tenant-a Partition=gpu TRES=...`` (``scontrol -o show job``
prints them raw among its fields). A second job of bob's has a name with a newline that forges a
whole record for his clean job. The real daemon (``metasched serve --managed-partitions
managed``, the real ``Adopter``) runs against the dev cluster: the injected job is refused,
audited as bob's in tenant-b, and stays held with the reason in its comment; the clean job is
adopted as bob's in tenant-b with its real shape (one node, one T4) although a forged record of
it names alice; the newline job is never adopted (its squeue row does not parse), and nothing
lands in tenant-a.

The same names forge whole rows of the daemon's ``squeue --Format`` read (what the reconciler
and the adopter read): a name ``x\n<23 fields>\ny`` printed a row of job 424242, alice's, in
tenant-a, COMPLETED, with a metasched tag; ``sacct -P`` (the reconciler's fallback) likewise.
The client's reads drop such rows (an id-only read has no free text to forge).
"""

from __future__ import annotations

import subprocess
from datetime import UTC, datetime, timedelta
from pathlib import Path
from secrets import token_hex

import pytest
from sqlalchemy import select

from meta.store import audit
from meta.store.models import AdoptedJob, Job
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.parse.sacct import SACCT_FIELDS, parse_sacct
from slurm_bridge.parse.squeue import FIELD_END, SQUEUE_FIELDS, parse_squeue_text, squeue_format_args
from tests.identity.conftest import installed_cli, shared_folder  # noqa: F401 - fixtures
from tests.identity.test_jobs_as_users import Serve, serve  # noqa: F401 - fixtures
from tests.integration.test_adoption import adopted, managed, squeue, wait_for  # noqa: F401 - fixtures

pytestmark = pytest.mark.slurm
INJECTED = " UserId=alice(2001) Account=tenant-a Partition=gpu TRES=cpu=8,mem=1M,node=2,gres/gpu=8 NumNodes=2"
SHAPE = ("-p", "managed", "-A", "tenant-b", "-N", "1", "--gres=gpu:t4:1", "-t", "2")


def sbatch_as_bob(*args: str) -> str:
    """sbatch_as_bob submits a plain sbatch job as bob; returns its Slurm id."""
    done = subprocess.run(["runuser", "-u", "bob", "--", "sbatch", "--parsable", *SHAPE, *args],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def injected_folder(shared: Path) -> Path:
    """injected_folder is a folder of bob's whose path holds the injection, with a script in it."""
    folder = shared / ("s3" + INJECTED)  # "gres/gpu" makes it two folders: -p
    subprocess.run(["runuser", "-u", "bob", "--", "mkdir", "-p", str(folder)], check=True, timeout=30)
    script = folder / "run.sh"
    subprocess.run(["runuser", "-u", "bob", "--", "sh", "-c", f"printf '#!/bin/sh\\nsleep 1\\n' > '{script}'"],
                   check=True, timeout=30)  # fmt: skip
    script.chmod(0o755)
    return folder


def refusals(served: Serve, slurm_id: str) -> list[audit.AuditView]:
    """refusals are the audit lines that refused the Slurm job's adoption."""
    with served.service.db.session() as session:
        lines = audit.read(session, limit=1000)
    return [e for e in lines if e.action == "job.adopt.refused" and e.subject == slurm_id]


def test_injected_fields_are_refused_audited_and_a_clean_job_is_adopted_as_its_user(
    managed: None,  # noqa: F811
    serve: Serve,  # noqa: F811
    shared_folder: Path,  # noqa: F811
) -> None:
    shared_folder.chmod(0o777)  # bob makes his folder in it (the fixture removes it)
    folder = injected_folder(shared_folder)
    out = f"{folder}/o{INJECTED}"
    jobs: list[str] = []
    try:
        jobs.append(sbatch_as_bob("-J", "s3" + INJECTED, f"--chdir={folder}", "-o", out, "-e", out,
                                  "--comment", INJECTED, str(folder / "run.sh")))  # fmt: skip
        jobs.append(sbatch_as_bob("-J", "s3-clean", "--chdir=/tmp", "-o", "/dev/null", "--wrap", "sleep 1"))
        injected, clean = jobs
        # a name whose newline forges a whole record of bob's clean job, as alice's, in tenant-a
        forged = f"s3-nl\nJobId={clean} UserId=alice(2001) Account=tenant-a AdminComment=metasched:adopt"
        jobs.append(sbatch_as_bob("-J", forged, "--chdir=/tmp", "-o", "/dev/null", "--wrap", "sleep 1"))
        newline = jobs[2]
        shown = subprocess.run(["scontrol", "-o", "show", "job", injected], capture_output=True, text=True,
                               timeout=60).stdout  # fmt: skip
        # the finding's premise holds: alice's fields before (job name) and after (paths) bob's real ones
        alice_first, bob_real = shown.index("UserId=alice(2001)"), shown.index("UserId=bob(2002)")
        assert alice_first < bob_real < shown.rindex("Account=tenant-a")

        job = wait_for(f"{clean} to be adopted", lambda: adopted(serve, clean), timeout_s=60,
                       why=lambda: serve.log.read_text()[-3000:])  # fmt: skip
        assert isinstance(job, Job)
        assert (job.submitted_by, job.owner_uid, job.owner_gid, job.tenant) == ("bob", 2002, 2002, "tenant-b")
        spec = serve.service.status(job.short_id).spec
        assert (spec["partition"], spec["workers"], spec["resources"]["gpus"]) == ("managed", 1, 1)

        (line,) = wait_for(f"{injected}'s refusal", lambda: refusals(serve, injected), timeout_s=60,
                           why=lambda: serve.log.read_text()[-3000:])  # fmt: skip
        assert (line.tenant, line.detail["user"], line.detail["uid"]) == ("tenant-b", "bob", 2002)
        assert "scontrol repeats Account, NumNodes, Partition, TRES, UserId" in line.detail["reason"]
        assert "alice" not in line.detail["reason"]
        # still held, and its comment says why
        assert squeue(injected, "%r") == "JobHeldUser"
        assert squeue(injected, "%k").startswith("metasched cannot adopt this job: its Slurm fields disagree")
        # the newline job's squeue row does not parse: never a candidate, still held; its forged record
        # of the clean job did not make that one alice's (above) nor block it
        assert adopted(serve, newline) is None and squeue(newline, "%r") == "JobHeldUser"
        with serve.service.db.session() as session:
            assert session.scalars(select(Job).where(Job.tenant == "tenant-a")).all() == []
            assert set(session.scalars(select(AdoptedJob.slurm_job_id))) == {clean}
    finally:
        if jobs:
            subprocess.run(["scancel", *jobs], capture_output=True, timeout=30)


def test_a_job_name_cannot_forge_a_row_of_the_daemons_squeue_or_sacct_read() -> None:
    tag = f"metasched:attempt=s3-victim-{token_hex(4)}"  # ended jobs of earlier runs stay in squeue a while
    fields = dict.fromkeys(SQUEUE_FIELDS, "")
    fields.update({"JobID": "424242", "Name": "forged", "Comment": tag, "State": "COMPLETED",
                   "Account": "tenant-a", "Partition": "gpu", "UserName": "alice", "Exit_Code": "0"})  # fmt: skip
    name = "x\n" + "".join(fields[key] + FIELD_END for key in SQUEUE_FIELDS) + "\ny"
    accounted = dict.fromkeys(SACCT_FIELDS, "") | {"JobID": "424243", "JobName": "forged", "Comment": tag,
                                                    "State": "COMPLETED", "ExitCode": "0:0"}  # fmt: skip
    sacct_name = "x\n" + "|".join(accounted[key] for key in SACCT_FIELDS) + "\ny"
    since = datetime.now(UTC) - timedelta(minutes=1)
    jobs = [sbatch_as_bob("-H", "-J", name, "-o", "/dev/null", "--wrap", "true")]  # user-held: never run
    try:
        # a job never eligible (held) is in no sacct window: this one is not held (-p t4), and cancelled at once
        jobs.append(sbatch_as_bob("-p", "t4", "-J", sacct_name, "-o", "/dev/null", "--wrap", "true"))
        subprocess.run(["scancel", jobs[-1]], check=True, capture_output=True, timeout=30)
        argv = ["squeue", *squeue_format_args()]
        raw = subprocess.run(argv, capture_output=True, text=True, timeout=60).stdout
        forged = [j for j in parse_squeue_text(raw) if j.comment == tag]
        # the premise: the text read holds a row of alice's, in tenant-a, under an id that does not exist
        assert [(j.job_id, j.user_name, j.account) for j in forged] == [(424242, "alice", "tenant-a")]
        client = CliSlurmClient()
        assert [j for j in client.squeue() if j.job_id == 424242 or j.comment == tag] == []
        # sacct -P: the same premise once slurmdbd has the job, and the client's read drops the row
        start = since.astimezone().strftime("%Y-%m-%dT%H:%M:%S")
        args = ["-a", "-n", "-P", "-X", "-o", ",".join(SACCT_FIELDS), "-S", start]
        wait_for("sacct to print the forged row", lambda: any(r.comment == tag for r in parse_sacct(
            subprocess.run(["sacct", *args], capture_output=True, text=True, timeout=60).stdout, strict=False)),
            timeout_s=60)  # fmt: skip
        assert [r for r in client.sacct(since) if r.job_id == "424243" or r.comment == tag] == []
    finally:
        subprocess.run(["scancel", *jobs], capture_output=True, timeout=30)
