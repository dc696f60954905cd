"""Test-only authentication for the API service: an authenticator that believes a test header.

NEVER used outside tests: it trusts what the client says. ``Authorization: TEST uid=1001``
(or ``MUNGE uid=1001``, what the CLI sends with ``METASCHED_CREDENTIAL_FILE``) names the caller;
an optional ``;bind=<sha256>`` must equal the digest of the request payload the MUNGE design
binds (docs/identity.md §3), so tests can check that client and service agree on what a
credential covers. Also: a principal resolver with a fixed membership table, and the API served
in-process (the production ``ApiServer``) on a temporary Unix socket.
"""

from __future__ import annotations

import hashlib
from collections.abc import Iterator
from contextlib import contextmanager
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from checkpoint import attempt_secret
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.service.http import create_app
from meta.service.server import ApiServer, Listen
from meta.store.models import Attempt
from tenants.auth import Identity, Unauthenticated
from tenants.identity import InvalidAccount, Principal, member
from tests.conftest import sqlite_database
from tests.runtime.support import place, share

USERS = {0: "root", 1001: "alice", 1002: "bob", 1003: "carol"}
HOME = {1001: "tenant-a", 1002: "tenant-b", 1003: "tenant-a"}  # uid -> the one tenant it is a member of
ROOT, ALICE, BOB = "TEST uid=0", "TEST uid=1001", "TEST uid=1002"


def payload_digest(method: str, target: str, body: bytes) -> str:
    """payload_digest is the SHA-256 of the payload a MUNGE credential binds (docs/identity.md §3)."""
    payload = f"metasched-v1\n{method.upper()}\n{target}\n{hashlib.sha256(body).hexdigest()}"
    return hashlib.sha256(payload.encode()).hexdigest()


@dataclass
class TestAuthenticator:
    """TestAuthenticator maps ``TEST uid=N`` / ``MUNGE uid=N[;bind=H]`` to an Identity (tests only)."""

    __test__ = False  # not a test class for pytest
    seen: list[tuple[str, str, bytes]] = field(default_factory=list)

    def authenticate(self, authorization_header: str | None, method: str, target: str, body: bytes) -> Identity:
        """authenticate believes the header's uid; a ``bind`` field must match this request."""
        if not authorization_header:
            raise Unauthenticated("no credential: send Authorization: MUNGE <credential>", "missing")
        scheme, _, credential = authorization_header.partition(" ")
        fields = dict(part.split("=", 1) for part in credential.strip().split(";") if "=" in part)
        if scheme not in ("TEST", "MUNGE") or not fields.get("uid", "").isdigit():
            raise Unauthenticated("malformed credential", "malformed")
        if "bind" in fields and fields["bind"] != payload_digest(method, target, body):
            raise Unauthenticated("credential bound to another request", "wrong_request")
        self.seen.append((method, target, body))
        uid = int(fields["uid"])
        return Identity(uid=uid, gid=uid, user=USERS.get(uid, f"uid{uid}"))


def principal_for(identity: Identity, requested_tenant: str | None) -> Principal:
    """principal_for: root is an admin (narrowed when it asks for a tenant); others are members of HOME."""
    if identity.uid == 0:
        return Principal(identity.user, requested_tenant, uid=0, gid=0, accounts=frozenset(), admin=True)
    home = HOME.get(identity.uid)
    if home is None or requested_tenant not in (None, home):
        raise InvalidAccount(requested_tenant)
    return member(identity.user, identity.uid, [home], tenant=requested_tenant)


@dataclass
class RunningApi:
    """RunningApi is the API served in this process by the production ApiServer, on a Unix socket."""

    server: ApiServer
    authenticator: TestAuthenticator

    @property
    def address(self) -> str:
        """address is the client's METASCHED_API value."""
        return self.server.addresses()[0]


@contextmanager
def running_api(service: Service, folder: Path, **options: Any) -> Iterator[RunningApi]:
    """running_api serves ``create_app(service, TestAuthenticator, principal_for)`` until the block ends."""
    authenticator = TestAuthenticator()
    app = create_app(service, authenticator, principal_for, **options)
    server = ApiServer(app, Listen(socket_path=folder / "api.sock"))
    server.start()
    try:
        yield RunningApi(server, authenticator)
    finally:
        server.stop()


def alices_attempt(
    service: Service,
    spec: Any,
    *,
    state: AttemptState = AttemptState.RUNNING,
    node: str = "node1",
    submit_dir: str | None = None,
) -> tuple[str, str]:
    """alices_attempt is an attempt of a job alice (uid 1001) submitted, in ``state``, with a fresh secret: (id, secret)."""
    job = service.submit(spec, principal=member("alice", 1001, ["tenant-a"]), submit_dir=submit_dir).job
    attempt = place(service.db, service.status(job.id).tasks[0].id, [share(node)], state)
    secret, digest = attempt_secret.new_secret()
    with service.db.session() as session:
        row = session.get(Attempt, attempt)
        assert row is not None
        row.secret_hash = digest
    return attempt, secret


@contextmanager
def sqlite_running_api(folder: Path) -> Iterator[tuple[RunningApi, Service]]:
    """sqlite_running_api is the API over a SQLite store in ``folder``, with its service, until the block ends."""
    service = Service(sqlite_database(folder / "api.sqlite"))
    try:
        with running_api(service, folder, secrets_root=folder / "secrets") as running:
            yield running, service
    finally:
        service.db.dispose()


def credential(folder: Path, uid: int) -> str:
    """credential writes the test credential of ``uid`` (what METASCHED_CREDENTIAL_FILE points at)."""
    path = folder / f"cred-{uid}"
    path.write_text(f"uid={uid}\n")
    return str(path)


def client_env(address: str, folder: Path, uid: int) -> dict[str, str | None]:
    """client_env is the thin CLI's environment as ``uid`` against the API at ``address``: no tenant, no store."""
    return {
        "METASCHED_API": address,
        "METASCHED_CREDENTIAL_FILE": credential(folder, uid),
        "METASCHED_TENANT": None,
        "METASCHED_DB": None,
        "METASCHED_DB_FILE": None,
    }
