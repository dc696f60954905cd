"""S15: a tenant's secret is read only by the jobs of the users its coordinator allows (issue 22).

Before, any member's job could read any secret of its tenant by declaring it, though only
coordinators may set them. Now a coordinator may name who may read a secret (``metasched secret
allow TENANT NAME USER...``); without a list, every member's job reads it as before (the default
keeps existing jobs working; ``--everyone`` gives a listed secret back to every member). As the
real users through the real service: dave (tenant-a's coordinator) sets a token and allows alice;
alice's job reads it, carol's (a member too) is refused, carol and alice may not change the list.

The dev cluster's other half of S15 (the managed partition's nodes are also in ``gpu`` and ``t4``)
is left as it is, for the reasons the README gives ("Plain sbatch, adopted").
"""

from __future__ import annotations

import hashlib
import pwd
import re
import secrets
from pathlib import Path

import pytest
from sqlalchemy import select

from meta.model.spec import spec_from_dict
from meta.model.states import AttemptState
from meta.store import audit
from meta.store.models import Attempt, Task
from tenants.identity import member
from tests.identity.conftest import Served
from tests.identity.users import Call, Outcome, run_one
from tests.runtime.support import place, share

REPO = Path(__file__).resolve().parents[2]
TENANT = "tenant-a"
NAME = "S15_TOKEN"


def _running_job(served: Served, user: str) -> dict[str, str]:
    """_running_job stores ``user``'s job declaring the secret with a running attempt; the job's environment."""
    owner = member(user, pwd.getpwnam(user).pw_uid, [TENANT])
    spec = spec_from_dict({"kind": "evaluation", "name": "s15", "tenant": TENANT, "resources": {"gpus": 1},
                           "command": "true", "secrets": [NAME]})  # fmt: skip
    job = served.service.submit(spec, principal=owner).job
    db = served.service.db
    with db.session() as session:
        task = session.scalar(select(Task.id).where(Task.job_id == job.id))
    attempt = place(db, task, [share("a100n1", gpu_type="a100")], AttemptState.RUNNING)
    proof = secrets.token_urlsafe(32)
    with db.session() as session:
        row = session.get(Attempt, attempt)
        assert row is not None
        row.secret_hash = hashlib.sha256(proof.encode()).hexdigest()  # what the launch stores
        token = row.fencing_token
    return {"METASCHED_ATTEMPT_ID": attempt, "METASCHED_FENCING_TOKEN": str(token),
            "METASCHED_ATTEMPT_SECRET": proof, "METASCHED_SECRET_NAMES": NAME}  # fmt: skip


def _fetch(served: Served, user: str, job_env: dict[str, str]) -> Outcome:
    """_fetch is what the rendered script runs at start: ``metasched job secrets --export`` as the job's user."""
    return run_one(Call(user, ("job", "secrets", "--export"), job_env), served.api, served.folder)


def _as(served: Served, user: str, *args: str, stdin: str | None = None) -> Outcome:
    return run_one(Call(user, args, stdin=stdin), served.api, served.folder)


@pytest.mark.slurm
@pytest.mark.postgres
def test_only_the_allowed_users_jobs_read_a_secret(served: Served) -> None:
    value = "s15-" + secrets.token_hex(16)
    assert _as(served, "dave", "secret", "set", TENANT, NAME, stdin=value + "\n").code == 0
    alice_job, carol_job = _running_job(served, "alice"), _running_job(served, "carol")
    before = _fetch(served, "carol", carol_job)  # the default: every member's job that declares it
    assert before.code == 0 and value in before.stdout, before.stderr

    allowed = _as(served, "dave", "secret", "allow", TENANT, NAME, "alice", "--json")
    assert allowed.code == 0 and allowed.json() == {"tenant": TENANT, "name": NAME, "users": ["alice"]}, (
        allowed
    )
    refused = _fetch(served, "carol", carol_job)
    assert refused.code != 0 and value not in refused.stdout + refused.stderr
    assert "for the jobs of alice only" in refused.stderr and "Traceback" not in refused.stderr
    mine = _fetch(served, "alice", alice_job)
    assert mine.code == 0 and value in mine.stdout, mine.stderr

    for user in ("carol", "alice", "bob"):  # members (and another tenant's user) may not change who reads it
        changed = _as(served, user, "secret", "allow", TENANT, NAME, user)
        assert changed.code != 0 and len(changed.stderr.strip().splitlines()) == 1, (user, changed)
    assert _fetch(served, "carol", carol_job).code != 0

    assert _as(served, "dave", "secret", "set", TENANT, NAME, stdin=value + "-rotated\n").code == 0
    assert (
        _fetch(served, "carol", carol_job).code != 0
    )  # a new value keeps the list: a rotation never widens it

    assert _as(served, "dave", "secret", "allow", TENANT, NAME, "--everyone").code == 0
    again = _fetch(served, "carol", carol_job)
    assert again.code == 0 and value + "-rotated" in again.stdout, again.stderr

    with served.service.db.session() as session:
        events = [e for e in audit.read(session, tenants=None) if e.action in ("secret.allow", "secret.read")]
    allows = [e.detail.get("users") for e in events if e.action == "secret.allow"]
    assert sorted(map(str, allows)) == sorted(map(str, [["alice"], "every member"])), allows
    assert value not in repr([(e.subject, e.detail) for e in events])


@pytest.mark.slurm
@pytest.mark.postgres
def test_allow_names_an_existing_secret_and_real_user_names(served: Served) -> None:
    missing = _as(served, "dave", "secret", "allow", TENANT, "NO_SUCH_SECRET", "alice")
    assert missing.code == 1 and "not found" in missing.stderr
    assert _as(served, "dave", "secret", "set", TENANT, NAME, stdin="v\n").code == 0
    for bad in (("bad user",), ("alice", "--everyone"), ()):
        refused = _as(served, "dave", "secret", "allow", TENANT, NAME, *bad)
        assert refused.code == 2 and len(refused.stderr.strip().splitlines()) == 1, (bad, refused)


def _partitions(conf: str) -> dict[str, set[str]]:
    """_partitions maps each partition of a slurm.conf to its node names (``t4n[1-2]`` expanded)."""
    nodes: dict[str, set[str]] = {}
    for name, spec in re.findall(r"^PartitionName=(\S+)\s+Nodes=(\S+)", conf, re.M):
        found: set[str] = set()
        for prefix, low, high in re.findall(r"([a-z0-9]+?)\[(\d+)-(\d+)\]", spec):
            found |= {f"{prefix}{i}" for i in range(int(low), int(high) + 1)}
        nodes[name] = found or {spec}
    return nodes


def test_the_managed_nodes_are_exclusive_or_the_readme_says_why_not() -> None:
    partitions = _partitions((REPO / "deploy" / "slurm" / "slurm.conf").read_text())
    managed = partitions.pop("managed")
    assert managed, "the dev cluster has a managed partition with nodes"
    shared = sorted(name for name, nodes in partitions.items() if nodes & managed or nodes == {"ALL"})
    if not shared:
        return  # exclusive: plain sbatch reaches the managed nodes only through metasched
    readme = " ".join((REPO / "README.md").read_text().split())
    assert (
        "t4n[1-2], are also in" in readme
        and "a plain `sbatch -p t4` reaches them without metasched" in readme
    )
    assert all(f"`{name}`" in readme for name in shared), shared  # it names every partition that overlaps
