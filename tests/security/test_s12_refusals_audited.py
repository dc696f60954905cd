"""S12: every authorization refusal and every authentication failure leaves an audit row — never the secret (issue 22).

Through the real ``metasched serve`` (PostgreSQL, MUNGE, the dev cluster's associations), as
real users with the installed CLI and raw requests: mallory (uid 2006, no Slurm association)
asks for tenant-a (``InvalidAccount``), bob sets a secret of tenant-a (``Forbidden``), alice asks
for an admin-only prune (``Forbidden``); and requests with no credential (from mallory's own process), a
forged one and one of mallory's bound to another request get 401. Each is a row: the caller (or
for a refused credential, the peer the kernel names, ``uid:2006``), what was refused and why —
and no credential or secret value appears anywhere in the audit.
"""

from __future__ import annotations

import json
import subprocess
from pathlib import Path

import pytest

from meta.store import audit
from tenants.credential import request_payload
from tests.identity.conftest import Served
from tests.identity.users import Call, forged, munge_as, request, run_all

pytestmark = [pytest.mark.slurm, pytest.mark.postgres]

SECRET_VALUE = "s12-not-for-the-audit"
SENDER = Path(__file__).with_name("sender.py")


def _audit(served: Served) -> list[audit.AuditView]:
    with served.service.db.session() as session:
        return audit.read(session, limit=10_000)


def test_authorization_refusals_are_audited(served: Served) -> None:
    mallory, bob, alice = run_all([
        Call("mallory", ("list",), env={"METASCHED_TENANT": "tenant-a"}),  # act for a tenant not hers
        Call("bob", ("secret", "set", "tenant-a", "S12_TOKEN"), stdin=SECRET_VALUE),
        Call("alice", ("audit", "prune", "--before", "90d", "--yes")),
    ], served.api, served.folder)  # fmt: skip
    assert mallory.code != 0 and bob.code == 1 and alice.code == 1, (mallory, bob, alice)
    refused = {
        (e.actor, e.subject, e.detail["kind"]) for e in _audit(served) if e.action == "request.refused"
    }
    assert ("mallory", "list_jobs", "InvalidAccount") in refused
    assert ("bob", "set_secret", "Forbidden") in refused
    assert ("alice", "audit_prune", "Forbidden") in refused
    assert SECRET_VALUE not in repr(_audit(served))


def test_authentication_failures_are_audited_by_peer(served: Served) -> None:
    mine = munge_as("mallory", payload=request_payload("GET", "/v1/whoami", b""))
    bad = {"missing": None, "forged": f"MUNGE {forged(mine)}", "other request": f"MUNGE {mine}"}
    # the first two from root's test process; mallory's own credential is replayed for another route
    statuses = {what: request(served.socket, "GET", "/v1/jobs", header)[0] for what, header in bad.items()}
    assert statuses == {"missing": 401, "forged": 401, "other request": 401}, statuses
    argv = [
        "runuser",
        "-u",
        "mallory",
        "--",
        "/usr/bin/python3",
        str(SENDER),
        str(served.socket),
        "/v1/tenants",
    ]
    answer = json.loads(subprocess.run(argv, capture_output=True, text=True, timeout=120, check=True).stdout)
    assert answer["statuses"] == {"401": 1}, answer  # from mallory's own process: the peer is uid 2006
    failures = [e for e in _audit(served) if e.action == "auth.refused"]
    kinds = {(e.actor, e.detail["kind"], e.subject) for e in failures}
    assert ("uid:2006", "missing", "GET /v1/tenants") in kinds, kinds  # the kernel's word for who it was
    assert {"missing", "wrong_request"} <= {kind for _, kind, _ in kinds}, kinds
    assert all(
        e.subject.split(" ")[1].startswith("/v1/") for e in failures
    )  # route templates, never a raw path
    text = json.dumps([e.to_dict() for e in _audit(served)])
    assert mine.strip(":").split(":")[-1][:40] not in text  # no credential in the audit
