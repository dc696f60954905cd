"""The isolation matrix (issue 12): every API operation × every kind of caller, through the real CLI as real users.

One ``metasched serve`` (PostgreSQL, MUNGE against the host's munged, Slurm's associations from
the dev cluster's sacctmgr; ``conftest.py``) and the CLI ``deploy/install-cli`` installed, run
with ``runuser`` as alice (owner, tenant-a), bob (tenant-b), carol (both), dave (coordinator of
tenant-a), oscar (AdminLevel Operator) and root, and with the credentials an attacker may hold:
none (no munged), forged, expired, replayed. ``EXPECTED`` is the table; every cell is checked:
an allowed cell must do what it says (the cancel cancels, the secret is set, the commit is
stored), a denied one must fail with its exit code and one line (no traceback) in the expected
words and leave its target untouched. Without any credential the service itself is also asked
directly, for every operation: 401 before the body is read.

Job-side cells (commit, checkpoint report): docs/identity.md §5 accepts them only from the
job's owner with the attempt's secret. The service's OpenAPI schema says which rule runs: while
those bodies carry no attempt secret, callers who may see the job's tenant are accepted with the
current fencing token; once they do, only alice holding her attempt's secret (as her job has it,
in METASCHED_ATTEMPT_SECRET) is, and the owner without it or others holding it are refused.
"""

from __future__ import annotations

import hashlib
import pwd
from dataclasses import dataclass, field
from pathlib import Path
from secrets import token_urlsafe

import pytest
from sqlalchemy import select

from meta.model.spec import spec_from_dict
from meta.model.states import AttemptState
from meta.store.models import Attempt, Checkpoint, Job, PartitionCommit, Task, Tenant
from tenants import secrets as secret_files
from tenants.identity import Principal, member
from tests.identity.conftest import Served
from tests.identity.users import (
    Call,
    Outcome,
    expired_credentials,
    forged,
    munge_as,
    request,
    run_all,
    used_credential,
)
from tests.runtime.support import place, share

pytestmark = [pytest.mark.slurm, pytest.mark.postgres]

USERS = ("alice", "bob", "carol", "dave", "oscar", "root")
FAULTS = ("none", "forged", "expired", "replayed")
CALLERS = USERS + FAULTS
TENANT = "tenant-a"
SBATCH_REFUSAL = "error: Batch job submission failed: Invalid account or account/partition combination specified"

A, D = "allow", "deny"
_ = D  # the unauthenticated columns: always denied
# fmt: off
EXPECTED: dict[str, tuple[str, ...]] = {
    #                   alice bob carol dave oscar root   none forged expired replayed
    "submit":          (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "msbatch":         (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "msbatch -A nosuch": (D,  D,  D,    D,   D,    D,     _,   _,     _,      _),
    "status":          (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "list":            (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "explain":         (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "outputs":         (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "checkpoint list": (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "cancel":          (A,    D,  D,    A,   A,    A,     _,   _,     _,      _),
    "retry":           (A,    D,  D,    A,   A,    A,     _,   _,     _,      _),
    "hold":            (A,    D,  D,    A,   A,    A,     _,   _,     _,      _),
    "release":         (A,    D,  D,    A,   A,    A,     _,   _,     _,      _),
    "secret list":     (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "secret set":      (D,    D,  D,    A,   A,    A,     _,   _,     _,      _),
    "secret delete":   (D,    D,  D,    A,   A,    A,     _,   _,     _,      _),
    "tenant show":     (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "tenant set":      (D,    D,  D,    D,   A,    A,     _,   _,     _,      _),
    "audit":           (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "commit":          (A,    D,  A,    A,   A,    A,     _,   _,     _,      _),
    "checkpoint report": (A,  D,  A,    A,   A,    A,     _,   _,     _,      _),
}
# fmt: on
JOB_SIDE = ("commit", "checkpoint report")
# with the attempt secret in the job-side bodies (docs/identity.md §5): the owner, holding its
# attempt's secret as the job does (METASCHED_ATTEMPT_SECRET), and nobody else
EXPECTED_WITH_ATTEMPT_SECRET = {row: (A,) + (D,) * (len(CALLERS) - 1) for row in JOB_SIDE}

# what a denied cell says (a substring of its one line); unauthenticated columns first
FAULT_WORDS = {
    "none": "cannot get a MUNGE credential",
    "forged": "invalid credential",
    "expired": "expired credential",
    "replayed": "replayed credential",
}
BOB_WORDS = {
    "submit": SBATCH_REFUSAL, "msbatch": SBATCH_REFUSAL, "list": "Invalid account", "audit": "Invalid account",
    "secret list": "secrets of tenant-a", "secret set": "secrets of tenant-a", "secret delete": "secrets of tenant-a",
    "tenant show": "not found", "tenant set": "admin",
}  # fmt: skip
MEMBER_WORDS = {
    "cancel": "only the owner", "retry": "only the owner", "hold": "only the owner", "release": "only the owner",
    "secret set": "you are not",
    "secret delete": "you are not", "tenant set": "admin",
}  # fmt: skip
# the route of each row, asked without any credential
ROUTES = {
    "submit": ("POST", "/v1/jobs"), "msbatch": ("POST", "/v1/jobs"), "msbatch -A nosuch": ("POST", "/v1/jobs"),
    "status": ("GET", "/v1/jobs/{job}"), "list": ("GET", "/v1/jobs?as_tenant=tenant-a"),
    "explain": ("GET", "/v1/jobs/{job}/explain"), "outputs": ("GET", "/v1/jobs/{infer}/outputs"),
    "checkpoint list": ("GET", "/v1/jobs/{train}/checkpoints"), "cancel": ("POST", "/v1/jobs/{job}/cancel"),
    "retry": ("POST", "/v1/jobs/{job}/retry"), "hold": ("POST", "/v1/jobs/{job}/hold"),
    "release": ("POST", "/v1/jobs/{held}/release"), "secret list": ("GET", "/v1/tenants/tenant-a/secrets"),
    "secret set": ("PUT", "/v1/tenants/tenant-a/secrets/X"), "secret delete": ("DELETE", "/v1/tenants/tenant-a/secrets/X"),
    "tenant show": ("GET", "/v1/tenants/tenant-a"), "tenant set": ("PUT", "/v1/tenants/tenant-a"),
    "audit": ("GET", "/v1/audit?as_tenant=tenant-a"), "commit": ("POST", "/v1/attempts/{commit_attempt}/commit"),
    "checkpoint report": ("POST", "/v1/attempts/{train_attempt}/checkpoints"),
}  # fmt: skip


# --- the world the matrix runs in ----------------------------------------------------------------


@dataclass
class World:
    """World is what the cells act on: alice's jobs and attempts in tenant-a, files, credentials."""

    served: Served
    job: str = ""  # alice's pending job: reads, and the target of refused cancels
    cancelled: str = ""  # alice's cancelled job: the target of refused retries
    own_jobs: dict[str, str] = field(default_factory=dict)  # caller -> alice's job that caller cancels and retries
    held: str = ""  # alice's job under her own hold: the target of refused releases
    hold_jobs: dict[str, str] = field(default_factory=dict)  # caller -> alice's waiting job that caller holds
    release_jobs: dict[str, str] = field(default_factory=dict)  # caller -> alice's held job that caller releases
    infer: str = ""
    commit_attempts: dict[str, tuple[str, int]] = field(default_factory=dict)  # caller -> (attempt, token)
    train: str = ""
    train_attempt: tuple[str, int] = ("", 0)
    files: dict[str, str] = field(default_factory=dict)
    attempt_secret: bool = False  # the job-side routes ask for the attempt secret (docs/identity.md §5)
    secrets: dict[str, str] = field(default_factory=dict)  # attempt id -> its secret (when the store keeps digests)
    expected: dict[str, tuple[str, ...]] = field(default_factory=lambda: dict(EXPECTED))
    credentials: dict[str, list[str]] = field(default_factory=dict)  # fault -> credential files, one per cell

    def allowed(self, row: str, caller: str) -> bool:
        """allowed tells whether the table allows ``caller`` to do ``row``."""
        return self.expected[row][CALLERS.index(caller)] == A

    def path(self, name: str) -> Path:
        """path is a file in the shared folder."""
        return self.served.folder / name


def _alice() -> Principal:
    """_alice is alice as the service sees her: her uid, a member of tenant-a."""
    return member("alice", pwd.getpwnam("alice").pw_uid, [TENANT])


def _alice_submit(world: World, spec: dict) -> tuple[str, list[str]]:
    """_alice_submit stores a job of alice (the owner) in-process; its short id and task ids."""
    service = world.served.service
    job = service.submit(spec_from_dict({"tenant": TENANT, **spec}), principal=_alice()).job
    with service.db.session() as session:
        tasks = list(session.scalars(select(Task.id).where(Task.job_id == job.id).order_by(Task.index)))
    return job.short_id, tasks


def _running(world: World, task_id: str) -> tuple[str, int]:
    """_running places a running attempt on a task; (attempt id, fencing token)."""
    db = world.served.service.db
    attempt = place(db, task_id, [share("a100n1", gpu_type="a100")], AttemptState.RUNNING)
    with db.session() as session:
        row = session.get(Attempt, attempt)
        assert row is not None
        if hasattr(row, "secret_hash"):  # what the launch does (docs/identity.md §5): the store keeps a digest
            world.secrets[attempt] = token_urlsafe(32)
            row.secret_hash = hashlib.sha256(world.secrets[attempt].encode()).hexdigest()
        return attempt, row.fencing_token


def build_world(world: World) -> None:
    """build_world makes alice's jobs, running attempts, secrets, job files and the fault credentials."""
    served = world.served
    evaluation = {"kind": "evaluation", "name": "m", "resources": {"gpus": 1}, "command": "true"}
    world.job, _ = _alice_submit(world, evaluation)
    world.cancelled, _ = _alice_submit(world, evaluation)
    served.service.cancel(world.cancelled, principal=_alice())
    for caller in USERS:
        if world.allowed("cancel", caller):
            world.own_jobs[caller], _ = _alice_submit(world, evaluation)
        if world.allowed("hold", caller):
            world.hold_jobs[caller], _ = _alice_submit(world, evaluation)
        if world.allowed("release", caller):
            world.release_jobs[caller], _ = _alice_submit(world, evaluation)
            served.service.hold(world.release_jobs[caller], principal=_alice())
    world.held, _ = _alice_submit(world, evaluation)
    served.service.hold(world.held, principal=_alice())
    output = world.path("out")
    world.infer, partitions = _alice_submit(world, {
        "kind": "inference", "name": "inf", "command": "true", "partitions": len(USERS) + 1, "output": str(output),
        "resources": {"gpus": 1, "gpu_type": "a100"},
    })  # fmt: skip
    world.commit_attempts = {"target": _running(world, partitions[0])}  # the partition nobody may commit
    for caller, task in zip(USERS, partitions[1:], strict=True):
        world.commit_attempts[caller] = _running(world, task)
    world.train, (train_task,) = _alice_submit(world, {
        "kind": "training", "name": "tr", "command": "true", "preemptible": True,
        "checkpoint": {"dir": str(world.path("ck")), "interval": "10m"}, "resources": {"gpus": 1, "gpu_type": "a100"},
    })  # fmt: skip
    world.train_attempt = _running(world, train_task)
    for caller in CALLERS:  # one secret per caller for the delete row
        secret_files.set_secret(served.secrets, TENANT, f"DEL_{caller.upper()}", "v")
    staging = world.path("staging")
    staging.mkdir()
    (staging / "part.txt").write_text("rows\n")
    job_file = world.path("job.yaml")
    job_file.write_text(f"kind: evaluation\nname: m\ntenant: {TENANT}\nresources: {{gpus: 1}}\ncommand: 'true'\n")
    world.files = {"job": str(job_file), "staging": str(staging)}
    _credentials(world)


def _write(world: World, name: str, credential: str) -> str:
    path = world.path(name)
    path.write_text(credential + "\n")
    path.chmod(0o644)
    return str(path)


def _credentials(world: World) -> None:
    """_credentials writes the fault columns' credential files: forged, expired (one per cell), replayed."""
    rows = len(EXPECTED)
    world.credentials["forged"] = [_write(world, "forged", forged(munge_as("alice")))] * rows
    world.credentials["replayed"] = [_write(world, "replayed", used_credential("alice", world.served.socket))] * rows
    made = expired_credentials("alice", rows)
    world.credentials["expired"] = [_write(world, f"expired-{i}", c) for i, c in enumerate(made)]


# --- the cells -------------------------------------------------------------------------------------


def _command(world: World, row: str, caller: str) -> tuple[str, ...]:
    """_command is what ``caller`` runs for ``row`` (allowed callers act on their own targets)."""
    allowed = world.allowed(row, caller)
    own = world.own_jobs.get(caller, world.job) if allowed else world.job
    name = caller.upper()
    commands: dict[str, tuple[str, ...]] = {
        "submit": ("submit", "-f", world.files["job"]),
        "msbatch": ("--parsable", "-A", TENANT, "--gres=gpu:1", "--wrap", "true"),
        "msbatch -A nosuch": ("--parsable", "-A", "nosuch", "--gres=gpu:1", "--wrap", "true"),
        "status": ("status", world.job, "--json"),
        "list": ("--tenant", TENANT, "list", "--json"),
        "explain": ("explain", world.job, "--json"),
        "outputs": ("outputs", world.infer, "--json"),
        "checkpoint list": ("checkpoint", "list", world.train, "--json"),
        "cancel": ("cancel", own),
        "retry": ("retry", own if allowed else world.cancelled, "--json"),
        "hold": ("hold", world.hold_jobs.get(caller, world.job) if allowed else world.job),
        "release": ("release", world.release_jobs.get(caller, world.held) if allowed else world.held),
        "secret list": ("secret", "list", TENANT, "--json"),
        "secret set": ("secret", "set", TENANT, f"SET_{name}"),
        "secret delete": ("secret", "delete", TENANT, f"DEL_{name}"),
        "tenant show": ("tenant", "show", TENANT),  # JSON already
        "tenant set": ("tenant", "set", TENANT, "--guaranteed", f"a100={_guarantee(caller)}", "--json"),
        "audit": ("--tenant", TENANT, "audit", "--json"),
        "commit": _commit_args(world, caller, allowed),
        "checkpoint report": ("checkpoint", "report", "--step", str(_step(caller, allowed)), "--path",
                              f"/ck/{caller}", "--attempt", world.train_attempt[0],
                              "--token", str(world.train_attempt[1]), "--json"),
    }  # fmt: skip
    return commands[row]


def _job_side_attempt(world: World, row: str, caller: str) -> str:
    """_job_side_attempt is the attempt a job-side cell names."""
    if row == "checkpoint report":
        return world.train_attempt[0]
    return world.commit_attempts[caller if world.allowed(row, caller) else "target"][0]


def _commit_args(world: World, caller: str, allowed: bool) -> tuple[str, ...]:
    attempt, token = world.commit_attempts[caller if allowed else "target"]
    return ("commit", "--dir", world.files["staging"], "--attempt", attempt, "--token", str(token), "--json")


def _guarantee(caller: str) -> int:
    return 1 + CALLERS.index(caller)


def _step(caller: str, allowed: bool) -> int:
    return (100 if allowed else 900) + CALLERS.index(caller)


def call_for(world: World, row: str, caller: str) -> Call:
    """call_for is the cell's call: the caller's Unix user (alice for the faults) and its environment."""
    env: dict[str, str] = {}
    if caller == "none":
        env["METASCHED_MUNGE_SOCKET"] = "/nonexistent/munge.socket.2"  # a host without munged
    elif caller in world.credentials:
        env["METASCHED_CREDENTIAL_FILE"] = world.credentials[caller][list(EXPECTED).index(row)]
    if row in JOB_SIDE and caller == "alice" and world.attempt_secret:  # the job's owner, as its job
        env["METASCHED_ATTEMPT_SECRET"] = world.secrets[_job_side_attempt(world, row, caller)]
    user = caller if caller in USERS else "alice"
    prog = "msbatch" if row.startswith("msbatch") else "metasched"
    stdin = "s3cret-value\n" if row == "secret set" else None
    return Call(user, _command(world, row, caller), env, stdin, prog)


# --- what an allowed cell must have done --------------------------------------------------------


def _job_row(world: World, short_id: str) -> Job:
    with world.served.service.db.session() as session:
        job = session.scalar(select(Job).where(Job.short_id == short_id))
        assert job is not None, short_id
        session.expunge(job)
        return job


def works(world: World, row: str, caller: str, out: Outcome) -> None:
    """works checks that an allowed cell did what it says, from the service's answer and the store."""
    uid = pwd.getpwnam(caller).pw_uid
    if row in ("submit", "msbatch"):
        job = _job_row(world, out.stdout.strip())
        assert (job.tenant, job.submitted_by, job.owner_uid) == (TENANT, caller, uid)
    elif row == "status":
        assert out.json()["short_id"] == world.job  # type: ignore[index]
    elif row == "list":
        assert world.job in [j["short_id"] for j in out.json()]  # type: ignore[union-attr, index]
    elif row == "explain":
        assert out.json()["job"] == world.job  # type: ignore[index]
    elif row == "outputs":
        answer = out.json()
        assert answer["job"] == world.infer and len(answer["partitions"]) == len(USERS) + 1  # type: ignore[index]
    elif row == "checkpoint list":
        answer = out.json()
        assert answer["workers"] == 1 and answer["recommended_interval_s"] > 0  # type: ignore[index]
    elif row == "cancel":
        assert _job_row(world, world.own_jobs[caller]).cancel_requested
    elif row == "hold":  # an admin's hold is JobHeldAdmin, anyone else's JobHeldUser (as Slurm's)
        assert _job_row(world, world.hold_jobs[caller]).hold == ("admin" if caller in ("oscar", "root") else "user")
    elif row == "release":
        assert _job_row(world, world.release_jobs[caller]).hold is None
    elif row == "retry":
        assert len(out.json()) == 1 and _states(world, world.own_jobs[caller]) == {"pending"}  # type: ignore[arg-type]
    elif row == "secret list":
        assert "DEL_ALICE" in out.json()  # type: ignore[operator]  # set up before; alice may not delete it
    elif row == "secret set":
        stored = secret_files.tenant_dir(world.served.secrets, TENANT) / f"SET_{caller.upper()}"
        assert stored.read_text() == "s3cret-value", stored
    elif row == "secret delete":
        assert not (secret_files.tenant_dir(world.served.secrets, TENANT) / f"DEL_{caller.upper()}").exists()
    elif row == "tenant show":
        assert out.json()["name"] == TENANT  # type: ignore[index]
    elif row == "tenant set":
        assert out.json()["guaranteed"] == {"a100": _guarantee(caller)}  # type: ignore[index]
    elif row == "audit":
        lines = out.json()
        assert lines and {line["tenant"] for line in lines} == {TENANT}  # type: ignore[union-attr, index]
    elif row == "commit":
        assert _committed(world, world.commit_attempts[caller][0])
    elif row == "checkpoint report":
        assert _step(caller, True) in _steps(world)


def _states(world: World, short_id: str) -> set[str]:
    with world.served.service.db.session() as session:
        job = session.scalar(select(Job).where(Job.short_id == short_id))
        assert job is not None
        return set(session.scalars(select(Task.state).where(Task.job_id == job.id)))


def _committed(world: World, attempt: str) -> bool:
    with world.served.service.db.session() as session:
        return session.scalar(select(PartitionCommit).where(PartitionCommit.attempt_id == attempt)) is not None


def _steps(world: World) -> set[int]:
    with world.served.service.db.session() as session:
        return set(session.scalars(select(Checkpoint.step).where(Checkpoint.attempt_id == world.train_attempt[0])))


def untouched(world: World) -> list[str]:
    """untouched lists what a denied cell changed: targets, secrets, guarantees, commits, checkpoints (none, we hope)."""
    problems = []
    job = _job_row(world, world.job)
    if job.cancel_requested or _states(world, world.job) != {"pending"}:
        problems.append(f"job {world.job} was changed by a refused cancel")
    if job.hold is not None:
        problems.append(f"job {world.job} was held by a refused hold")
    if _job_row(world, world.held).hold != "user":
        problems.append(f"job {world.held} was released by a refused release")
    if _states(world, world.cancelled) != {"cancelled"}:
        problems.append(f"job {world.cancelled} was changed by a refused retry")
    root = secret_files.tenant_dir(world.served.secrets, TENANT)
    for caller in CALLERS:
        for row, name, present_if_allowed in (("secret set", "SET", True), ("secret delete", "DEL", False)):
            allowed = world.allowed(row, caller)
            if (root / f"{name}_{caller.upper()}").exists() is not (allowed is present_if_allowed):
                problems.append(f"secret {name}_{caller.upper()}: {row} by {caller} had the wrong effect")
    with world.served.service.db.session() as session:
        guaranteed = session.get(Tenant, TENANT).guaranteed  # type: ignore[union-attr]
    if guaranteed != {"a100": _guarantee("root")}:  # root set it last among the allowed
        problems.append(f"tenant-a's guarantee is {guaranteed} after the refused tenant sets")
    if _committed(world, world.commit_attempts["target"][0]):
        problems.append("a refused commit was stored")
    if {step for step in _steps(world) if step >= 900}:
        problems.append("a refused checkpoint report was stored")
    if world.served.service.list_jobs(tenant="nosuch"):
        problems.append("a submit for a tenant that is not a Slurm account was stored")
    return problems


# --- the matrix -----------------------------------------------------------------------------------


@dataclass
class Cell:
    """Cell is one operation × caller: expected, what happened, and whether they match (with why not)."""

    row: str
    caller: str
    expected: str
    got: str = ""
    problem: str = ""


def denial_words(world: World, row: str, caller: str) -> str | None:
    """denial_words is what a denied cell's line must say (None: any one line; the attempt secret's words are part C's)."""
    if caller in FAULT_WORDS:
        return FAULT_WORDS[caller]
    if row == "msbatch -A nosuch":
        return SBATCH_REFUSAL
    if row in JOB_SIDE and world.attempt_secret:
        return None
    if caller == "bob":
        return BOB_WORDS.get(row, "not found")
    return MEMBER_WORDS.get(row)


def denial_problem(world: World, row: str, caller: str, out: Outcome) -> str:
    """denial_problem says what is wrong with a denied cell's outcome ('' when it is a proper denial)."""
    prog = "msbatch" if row.startswith("msbatch") else "metasched"
    if out.code == 0:
        return "it was allowed"
    if "Traceback" in out.stderr or out.stderr.count("\n") != 1 or not out.stderr.startswith(f"{prog}: error: "):
        return f"not one line: {out.stderr[:300]!r}"
    if out.stdout:
        return f"printed {out.stdout[:200]!r} besides its error"
    words = denial_words(world, row, caller)
    if words and words not in out.stderr:
        return f"expected {words!r} in {out.stderr.strip()!r}"
    # a refused tenant is a usage error (2), as sbatch's refusal; unauthenticated, forbidden, not found: 1
    code = 2 if words and "Invalid account" in words else 1
    if words and out.code != code:
        return f"exit {out.code}, expected {code}"
    return ""


def run_cells(world: World) -> list[Cell]:
    """run_cells runs every cell in three rounds (allowed changes, then retries, then the denied writes)."""
    cells = [Cell(row, caller, world.expected[row][i]) for row in world.expected for i, caller in enumerate(CALLERS)]
    writes = ("cancel", "retry", "hold", "release", "secret set", "secret delete", "tenant set")

    def round_of(cell: Cell) -> int:
        if cell.expected == D and cell.row in writes:
            return 3  # after every allowed change, so "untouched" means something
        if cell.row == "retry" or (cell.row == "tenant set" and cell.caller == "root"):
            return 2  # a retry follows the cancel; two admins' guarantees one after the other
        return 1

    for number in (1, 2, 3):
        batch = [cell for cell in cells if round_of(cell) == number]
        outcomes = run_all([call_for(world, c.row, c.caller) for c in batch], world.served.api, world.served.folder)
        for cell, out in zip(batch, outcomes, strict=True):
            cell.got = A if out.code == 0 else D
            if cell.expected == A:
                try:
                    assert out.code == 0, out.stderr.strip() or out.stdout[:300]
                    works(world, cell.row, cell.caller, out)
                except AssertionError as exc:
                    cell.problem = f"allowed cell did not work: {exc}"
            else:
                cell.problem = denial_problem(world, cell.row, cell.caller, out)
    return cells


def no_credential_at_all(world: World) -> list[str]:
    """no_credential_at_all asks every route without an Authorization header: each must be 401 (problems listed)."""
    targets = {"job": world.job, "held": world.held, "infer": world.infer, "train": world.train,
               "commit_attempt": world.commit_attempts["target"][0], "train_attempt": world.train_attempt[0]}  # fmt: skip
    problems = []
    for row, (method, route) in ROUTES.items():
        status, body = request(world.served.socket, method, route.format(**targets))
        if status != 401 or body.get("error") != "Unauthenticated":
            problems.append(f"{row}: {method} {route} answered {status} {body}")
    return problems


def secret_misuse(world: World) -> list[str]:
    """secret_misuse: the owner without its attempt's secret, and others holding it, are all refused (problems listed)."""
    target = world.commit_attempts["target"][0]
    report = ("checkpoint", "report", "--step", "950", "--path", "/ck/x", "--attempt", world.train_attempt[0],
              "--token", str(world.train_attempt[1]))  # fmt: skip
    holding = {"METASCHED_ATTEMPT_SECRET": world.secrets[target]}
    calls = [
        Call("alice", _commit_args(world, "alice", False)),  # the owner, without the secret
        Call("bob", _commit_args(world, "bob", False), holding),  # another tenant's user with the secret
        Call("carol", _commit_args(world, "carol", False), holding),  # a member of the tenant with the secret
        Call("root", _commit_args(world, "root", False), holding),  # an admin with the secret
        Call("bob", report, {"METASCHED_ATTEMPT_SECRET": world.secrets[world.train_attempt[0]]}),
    ]
    problems = []
    for call, out in zip(calls, run_all(calls, world.served.api, world.served.folder), strict=True):
        if out.code == 0 or out.stderr.count("\n") != 1 or "Traceback" in out.stderr:
            problems.append(f"{call.user} {call.args[0]} with secret={bool(call.env)}: {out.code} {out.stderr!r}")
    return problems


def print_matrix(cells: list[Cell]) -> None:
    """print_matrix prints the table (rows: operations, columns: callers) and the counts, for CI logs."""
    width = max(len(row) for row in EXPECTED) + 2
    print("\nisolation matrix: expected/got per cell (A allow, D deny; ! = mismatch)")
    print("operation".ljust(width) + "".join(c.ljust(10) for c in CALLERS))
    for row in EXPECTED:
        line = row.ljust(width)
        for cell in (c for c in cells if c.row == row):
            mark = cell.got[0].upper() + ("!" if cell.problem else "")
            line += mark.ljust(10)
        print(line)
    outside = [c for c in cells if c.caller == "bob" or c.caller in FAULTS]
    denied_outside = sum(1 for c in outside if c.got == D)
    allowed = sum(1 for c in cells if c.expected == A)
    print(f"cells {len(cells)}: expected allowed {allowed}, denied {len(cells) - allowed}; "
          f"matched {sum(1 for c in cells if not c.problem)}/{len(cells)}; cross-tenant and unauthenticated cells "
          f"{len(outside)}, denied {denied_outside} ({100 * denied_outside / len(outside):.0f}%)")  # fmt: skip


def attempt_secret_required(served: Served) -> bool:
    """attempt_secret_required tells whether the service's own schema asks job-side calls for the attempt secret."""
    status, schema = request(served.socket, "GET", "/openapi.json")
    assert status == 200
    bodies = schema["components"]["schemas"]
    fields = set(bodies["CommitRequest"]["properties"]) | set(bodies["CheckpointReport"]["properties"])
    return any("secret" in name for name in fields)


def test_every_operation_by_every_caller(served: Served, capsys: pytest.CaptureFixture[str]) -> None:
    world = World(served, attempt_secret=attempt_secret_required(served))
    if world.attempt_secret:
        world.expected.update(EXPECTED_WITH_ATTEMPT_SECRET)
    build_world(world)
    cells = run_cells(world)
    with capsys.disabled():  # CI logs show the matrix, passing or not
        print_matrix(cells)
        print("job-side cells: " + ("the owner with its attempt's secret only" if world.attempt_secret
                                    else "the service asks no attempt secret yet: callers who may see the job's "
                                         "tenant, with the current fencing token"))  # fmt: skip
    problems = [f"{c.row} × {c.caller}: {c.problem}" for c in cells if c.problem]
    problems += no_credential_at_all(world)
    if world.attempt_secret:
        problems += secret_misuse(world)
    problems += untouched(world)
    # --tenant is never a privilege, and what bob may list or read holds nothing of tenant-a
    bob_list, bob_audit = run_all([Call("bob", ("list", "--json")), Call("bob", ("audit", "--json"))],
                                  served.api, served.folder)  # fmt: skip
    assert world.job not in bob_list.stdout and bob_list.code == 0
    assert bob_audit.code == 0 and all(line["tenant"] != TENANT for line in bob_audit.json())  # type: ignore[union-attr, index]
    assert not problems, "\n".join(problems)
