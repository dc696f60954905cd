"""Jobs run as their users and job-side calls prove the attempt, on the dev cluster (issue 12, docs/identity.md §5).

One real ``metasched serve`` (PostgreSQL, MUNGE, the dev cluster's associations, the real
Slurm commands) with its API on a socket every user reaches. alice submits a checkpointing
training job with the CLI ``deploy/install-cli`` installed, from a folder of her home:

- Slurm runs it as alice (squeue and sacct UserName), in that folder; its files and its
  ``slurm-<id>.out`` are alice's;
- its environment holds no store URL; its declared secret came through the API (tenant-a's
  value), and asking for tenant-b's secrets or reading their files fails;
- its own ``checkpoint report`` is accepted (MUNGE uid alice + attempt secret + token);
- squeue/scontrol show bob neither the fencing token nor the attempt secret, and bob cannot
  read the batch script;
- while it runs, bob (real MUNGE credential, the attempt id and token read off squeue/status,
  a guessed or even the real secret), carol (tenant-a, not the owner) and alice without the
  secret forge commits and checkpoint reports: all refused, each an audit line naming them.
"""

from __future__ import annotations

import json
import shutil
import signal
import subprocess
import sys
import time
from collections.abc import Iterator
from dataclasses import dataclass
from pathlib import Path
from secrets import token_hex

import pytest
from sqlalchemy import select

from meta.model.states import AttemptState
from meta.service.api import Service
from meta.store import audit
from meta.store.db import Database
from meta.store.models import Attempt, Checkpoint, Job
from meta.store.reset import truncate_all
from meta.store.site import stored_site_id
from tenants import secrets as secret_files
from tests.harness import squeue_keys
from tests.identity.conftest import MUNGE_SOCKET, REPO
from tests.identity.users import Call, Outcome, run_one

pytestmark = pytest.mark.slurm

ALICE_UID = 2001
ALICE_VALUE = "hf-alice-" + token_hex(8)
BOB_VALUE = "hf-bob-" + token_hex(8)
PG_PASSWORD_MARK = "metasched:metasched@"  # the dev store's credentials, in any URL form
JOB = """\
kind: training
name: as-alice
tenant: tenant-a
resources: {cpus: 1, memory: 1G}
time_limit: 5m
secrets: [HF_TOKEN]
checkpoint: {dir: SUBMIT_DIR/ckpt}
command: |
  set -u
  id -un > whoami.txt; pwd > pwd.txt; env > env.txt
  printf %s "$HF_TOKEN" > hf.txt
  metasched --tenant tenant-b job secrets --export > other.txt 2>&1; echo "tenant-b: $?" > tries.txt
  metasched secret list tenant-b >> other.txt 2>&1; echo "names: $?" >> tries.txt
  cat SECRETS_ROOT/tenant-b/HF_TOKEN >> other.txt 2>&1; echo "file: $?" >> tries.txt
  echo step-1 > ckpt-1
  metasched checkpoint report --step 1 --path "$PWD/ckpt-1" > report.txt 2>&1; echo "report: $?" >> tries.txt
  touch started
  for i in $(seq 240); do [ -e release ] && break; sleep 0.5; done
"""


LONG = """\
kind: evaluation
name: long
tenant: tenant-a
resources: {cpus: 1, memory: 1G}
time_limit: 5m
command: sleep 300
"""


@dataclass(frozen=True)
class Serve:
    """Serve is the running service: its API address, the secrets root and the store."""

    api: str
    secrets: Path
    service: Service
    log: Path

    def why(self, job_id: str) -> str:
        """why is what to read when the job did not get where it should: its status and the service's log."""
        status = self.service.status(job_id).to_dict()
        return json.dumps(status["task_list"], default=str)[-3000:] + "\n" + self.log.read_text()[-3000:]


@pytest.fixture
def serve(slurm_exclusive: None, installed_cli: Path, pg_database: Database, shared_folder: Path) -> Iterator[Serve]:
    """serve runs ``metasched serve`` against the real cluster, its API on a socket every user reaches."""
    truncate_all(pg_database)
    socket_path = shared_folder / "run" / "api.sock"
    secrets = shared_folder / "secrets"
    argv = [
        sys.executable, "-c", "from cli.main import main; main()", "--db", pg_database.url, "serve",
        "--state-dir", str(shared_folder / "state"), "--metrics-port", "0", "--period", "1",
        "--api-socket", str(socket_path), "--api-listen", "off", "--secrets-root", str(secrets),
        "--munge-socket", str(MUNGE_SOCKET), "--log-level", "WARNING",
    ]  # fmt: skip
    log = shared_folder / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    try:
        deadline = time.monotonic() + 60
        while not socket_path.exists():
            assert proc.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, "the API socket never appeared"
            time.sleep(0.1)
        yield Serve(f"unix://{socket_path}", secrets, Service(pg_database), log)
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        ours = [job_id for key, job_id in squeue_keys().items() if key.startswith("ms-")]
        if ours:  # nothing of ours left
            subprocess.run(["scancel", *ours], capture_output=True, timeout=30)
    assert PG_PASSWORD_MARK not in log.read_text()


@pytest.fixture
def alice_dir() -> Iterator[Path]:
    """alice_dir is a fresh folder in alice's home, made by alice."""
    folder = Path("/home/alice") / f"ms-as-user-{token_hex(4)}"
    subprocess.run(["runuser", "-u", "alice", "--", "mkdir", "-m", "0755", str(folder)], check=True, timeout=30)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def as_user(user: str, serve: Serve, cwd: Path, *args: str, **env: str) -> Outcome:
    """as_user runs the installed metasched as ``user`` in ``cwd`` with a clean environment."""
    return run_one(Call(user, tuple(args), env), serve.api, cwd)


def wait_for(what: str, done: object, timeout_s: float = 180, why: object = None) -> None:
    deadline = time.monotonic() + timeout_s
    while not done():  # type: ignore[operator]
        assert time.monotonic() < deadline, f"timed out waiting for {what}: " + (why() if why else "")  # type: ignore[operator]
        time.sleep(0.5)


def slurm_field(argv: list[str], user: str = "root") -> str:
    command = argv if user == "root" else ["runuser", "-u", user, "--", *argv]
    return subprocess.run(command, capture_output=True, text=True, timeout=60).stdout.strip()


def live_attempt(service: Service, job_id: str) -> Attempt | None:
    with service.db.session() as session:
        return session.scalar(select(Attempt).where(Attempt.job_id == job_id, Attempt.slurm_job_id.is_not(None)))


def run_long_job_as_alice(serve: Serve, alice_dir: Path) -> tuple[str, Attempt]:
    """run_long_job_as_alice submits LONG as alice and waits until its attempt runs in Slurm: (job id, attempt)."""
    (alice_dir / "long.yaml").write_text(LONG)
    submitted = as_user("alice", serve, alice_dir, "submit", "-f", "long.yaml", "--json")
    assert submitted.code == 0, submitted.stderr
    job_id = submitted.json()["id"]
    wait_for("alice's long job to run", lambda: (lambda a: a is not None and a.state == AttemptState.RUNNING.value)(
        live_attempt(serve.service, job_id)), why=lambda: serve.why(job_id))  # fmt: skip
    attempt = live_attempt(serve.service, job_id)
    assert attempt is not None
    return job_id, attempt


def test_a_job_runs_as_alice_and_bobs_forgeries_are_refused(serve: Serve, alice_dir: Path) -> None:
    secret_files.set_secret(serve.secrets, "tenant-a", "HF_TOKEN", ALICE_VALUE)
    secret_files.set_secret(serve.secrets, "tenant-b", "HF_TOKEN", BOB_VALUE)
    job_file = alice_dir / "job.yaml"
    subprocess.run(["runuser", "-u", "alice", "--", "tee", str(job_file)], input=JOB.replace("SECRETS_ROOT", str(serve.secrets)).replace("SUBMIT_DIR", str(alice_dir)),
                   capture_output=True, text=True, check=True, timeout=30)  # fmt: skip
    submitted = as_user("alice", serve, alice_dir, "submit", "-f", "job.yaml", "--json")
    assert submitted.code == 0, submitted.stderr
    job = submitted.json()
    with serve.service.db.session() as session:
        row = session.get(Job, job["id"])
        assert row is not None and (row.owner_uid, row.submit_dir) == (ALICE_UID, str(alice_dir))

    wait_for("the job to start", lambda: (alice_dir / "started").exists(),
             why=lambda: serve.why(job["id"]) + "\n" + "\n".join(p.name for p in alice_dir.iterdir()))  # fmt: skip
    attempt = live_attempt(serve.service, job["id"])
    assert attempt is not None and attempt.state in (AttemptState.LAUNCHING.value, AttemptState.RUNNING.value)
    slurm_id = str(attempt.slurm_job_id)

    # Slurm runs it as alice, in her folder; squeue shows an id, never the token or the secret
    assert slurm_field(["squeue", "-h", "-j", slurm_id, "-o", "%u"]) == "alice"
    shown = slurm_field(["squeue", "-h", "-j", slurm_id, "-o", "%j|%k"], user="bob")
    site = stored_site_id(serve.service.db)
    assert shown == f"as-alice|metasched:site={site}:attempt={attempt.id}"  # the user's name; the tag is the comment
    script = slurm_field(["scontrol", "write", "batch_script", slurm_id, "-"])
    secret = next(line.split("=", 1)[1] for line in script.splitlines() if line.startswith("export METASCHED_ATTEMPT_SECRET="))
    assert secret not in slurm_field(["scontrol", "-o", "show", "job", slurm_id], user="bob")
    assert slurm_field(["scontrol", "write", "batch_script", slurm_id, "-"], user="bob") == ""  # not bob's to read
    assert ALICE_VALUE not in script and "HF_TOKEN" in script and PG_PASSWORD_MARK not in script

    # the job's own view: alice, her folder, no store, tenant-a's secret only
    assert (alice_dir / "whoami.txt").read_text().strip() == "alice"
    assert (alice_dir / "pwd.txt").read_text().strip() == str(alice_dir)
    env = (alice_dir / "env.txt").read_text()
    assert "METASCHED_DB" not in env and PG_PASSWORD_MARK not in env and "postgresql" not in env
    assert f"METASCHED_API={serve.api}" in env and "METASCHED_ATTEMPT_SECRET=" in env
    assert (alice_dir / "hf.txt").read_text() == ALICE_VALUE
    other = (alice_dir / "other.txt").read_text()
    assert BOB_VALUE not in other and f"export HF_TOKEN={ALICE_VALUE}" in other  # --tenant never switches the attempt's
    tries = dict(line.split(": ") for line in (alice_dir / "tries.txt").read_text().splitlines())
    assert tries["names"] != "0" and tries["file"] != "0" and tries["report"] == "0", tries
    for name in ("whoami.txt", "env.txt", "ckpt-1", "started"):
        assert (alice_dir / name).stat().st_uid == ALICE_UID, name

    # forgeries while the attempt is live: the id and token are what anyone reads off squeue and status
    forged = {"METASCHED_ATTEMPT_ID": attempt.id, "METASCHED_FENCING_TOKEN": str(attempt.fencing_token)}
    staging = alice_dir  # any folder the caller can read: the proof is refused before the files matter
    tries_by = [
        ("bob", {**forged, "METASCHED_ATTEMPT_SECRET": "guessed-" + token_hex(16)}, "not found"),
        ("bob", {**forged, "METASCHED_ATTEMPT_SECRET": secret}, "not found"),  # even with the real secret
        ("carol", {**forged, "METASCHED_ATTEMPT_SECRET": secret}, "runs as uid 2001"),
        ("alice", forged, "no attempt secret"),  # the owner outside the job, without its secret
    ]
    for user, env_vars, words in tries_by:
        report = as_user(user, serve, Path("/tmp"), "checkpoint", "report", "--step", "99", "--path", "/tmp/x", **env_vars)
        commit = as_user(user, serve, Path("/tmp"), "commit", "--dir", str(staging), **env_vars)
        for outcome in (report, commit):
            assert outcome.code == 1 and words in outcome.stderr and outcome.stderr.count("\n") == 1, (user, outcome)

    subprocess.run(["runuser", "-u", "alice", "--", "touch", str(alice_dir / "release")], check=True, timeout=30)
    wait_for("the job to end", lambda: (lambda a: a is not None and a.state == AttemptState.SUCCEEDED.value)(
        _attempt(serve.service, attempt.id)))  # fmt: skip
    wait_for("sacct to record it", lambda: slurm_field(["sacct", "-n", "-X", "-P", "-j", slurm_id, "-o", "User"]) != "",
             timeout_s=60)  # fmt: skip
    assert slurm_field(["sacct", "-n", "-X", "-P", "-j", slurm_id, "-o", "User"]) == "alice"
    output = alice_dir / f"slurm-{slurm_id}.out"
    assert output.exists() and output.stat().st_uid == ALICE_UID  # sbatch's default, written as alice

    with serve.service.db.session() as session:
        steps = list(session.scalars(select(Checkpoint.step).where(Checkpoint.attempt_id == attempt.id)))
        lines = [line.to_dict() for line in audit.read(session, limit=1000)]
    assert steps == [1]  # the job's own report; none of the forged step-99 ones
    # the job-side refusals; other refused requests are audited as request.refused (S12), not counted here
    refused = sorted((line["actor"], line["action"]) for line in lines
                     if line["action"].endswith(".refused") and line["action"] != "request.refused")
    assert refused == sorted(
        [("bob", "checkpoint.report.refused"), ("bob", "output.commit.refused")] * 2
        + [("carol", "checkpoint.report.refused"), ("carol", "output.commit.refused")]
        + [("alice", "checkpoint.report.refused"), ("alice", "output.commit.refused")]
    ), refused
    allowed = {(line["actor"], line["action"]) for line in lines}
    assert {("alice", "checkpoint.report"), ("alice", "secret.read")} <= allowed
    assert secret not in json.dumps(lines) and ALICE_VALUE not in json.dumps(lines)

    # the daemon (root) still stops a user's job in Slurm: alice cancels, the daemon runs scancel
    long_id, running = run_long_job_as_alice(serve, alice_dir)
    assert slurm_field(["squeue", "-h", "-j", str(running.slurm_job_id), "-o", "%u"]) == "alice"
    assert as_user("alice", serve, alice_dir, "cancel", long_id).code == 0
    wait_for("Slurm to cancel it", lambda: slurm_field(
        ["sacct", "-n", "-X", "-P", "-j", str(running.slurm_job_id), "-o", "State"]).startswith("CANCELLED"),
        timeout_s=60)  # fmt: skip


def _attempt(service: Service, attempt_id: str) -> Attempt | None:
    with service.db.session() as session:
        return session.get(Attempt, attempt_id)
