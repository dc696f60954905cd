"""S7: a job's submitting environment is its owner's (issue 22).

alice submits with msbatch (``--export=ALL``, the default) from a shell holding a token; the
spec stores that environment. Through the real service, as the real users: alice and oscar (an
Operator) read it back in ``metasched status --json``; carol (a member of tenant-a) and dave
(its coordinator) see the job but neither the token's value nor its name. Slurm's own rule,
measured on the dev cluster, is the same for the batch script: ``scontrol write batch_script``
answers alice and oscar and refuses carol and dave.
"""

from __future__ import annotations

import secrets

import pytest

from tests.identity.conftest import Served
from tests.identity.users import Call, run_all, run_one

pytestmark = [pytest.mark.slurm, pytest.mark.postgres]


def _submit_with_a_token(served: Served, token: str) -> str:
    """_submit_with_a_token is the short id of alice's msbatch job sent from a shell holding ``token``."""
    call = Call("alice", ("--parsable", "-A", "tenant-a", "--gres=gpu:1", "--wrap", "true"),
                {"GITHUB_TOKEN": token, "AWS_SECRET_ACCESS_KEY": token[::-1]}, prog="msbatch")  # fmt: skip
    done = run_one(call, served.api, served.folder)
    assert done.code == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def test_only_the_owner_and_admins_read_a_jobs_environment(served: Served) -> None:
    token = "ghp_" + secrets.token_hex(16)
    job = _submit_with_a_token(served, token)
    users = ("alice", "oscar", "carol", "dave")
    outcomes = run_all([Call(user, ("status", job, "--json")) for user in users], served.api, served.folder)
    for user, done in zip(users, outcomes, strict=True):
        assert done.code == 0, (user, done.stderr)
        spec = done.json()["spec"]  # type: ignore[index]
        if user in ("alice", "oscar"):
            assert spec["env"]["GITHUB_TOKEN"] == token, user
            assert spec["env"]["AWS_SECRET_ACCESS_KEY"] == token[::-1], user
            continue
        assert token not in done.stdout and token[::-1] not in done.stdout, user
        assert "GITHUB_TOKEN" not in spec["env"] and spec["env_hidden"] >= 2, user
    text = run_all([Call(user, ("status", job)) for user in ("carol", "dave")], served.api, served.folder)
    assert all(done.code == 0 and token not in done.stdout for done in text), text


def test_a_coordinators_cancel_does_not_answer_the_environment(served: Served) -> None:
    token = "ghp_" + secrets.token_hex(16)
    job = _submit_with_a_token(served, token)
    done = run_one(Call("dave", ("cancel", job, "--json")), served.api, served.folder)
    assert done.code == 0, done.stderr
    assert token not in done.stdout and "GITHUB_TOKEN" not in done.stdout
