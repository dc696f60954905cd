"""Running the installed CLI as the dev cluster's Unix users, and the credentials an attacker holds.

Every call is ``runuser -u USER -- env -i ... metasched ...``: the CLI that ``deploy/install-cli``
put in /usr/local/bin, with a clean environment (PATH, HOME, METASCHED_API and what the cell
adds), in a folder every user may read. The credential faults are files for
``METASCHED_CREDENTIAL_FILE``: forged (a real credential with one character changed), expired
(made with ``munge --ttl 1`` and waited past: one per use, munged records a decoded credential),
replayed (a real credential the service already accepted once).
"""

from __future__ import annotations

import http.client
import json
import os
import pwd
import socket
import subprocess
import time
from collections.abc import Iterable, Mapping
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path

from tenants.credential import request_payload

BIN_DIR = Path(os.environ.get("METASCHED_BIN_DIR", "/usr/local/bin"))
CALL_TIMEOUT_S = 60


@dataclass(frozen=True)
class Call:
    """Call is one CLI command run as a Unix user: program, arguments, extra environment, standard input."""

    user: str
    args: tuple[str, ...]
    env: Mapping[str, str] = field(default_factory=dict)
    stdin: str | None = None
    prog: str = "metasched"


@dataclass(frozen=True)
class Outcome:
    """Outcome is what a call did: exit code, standard output and standard error."""

    code: int
    stdout: str
    stderr: str

    def json(self) -> object:
        """json is the decoded standard output."""
        return json.loads(self.stdout)


def argv_of(call: Call, api: str) -> list[str]:
    """argv_of is the command line of ``call``: runuser (unless root), a clean environment, the installed program."""
    home = pwd.getpwnam(call.user).pw_dir
    env = {"PATH": f"{BIN_DIR}:/usr/bin:/bin", "HOME": home, "LANG": "C.UTF-8", "METASCHED_API": api, **call.env}
    command = ["env", "-i", *(f"{key}={value}" for key, value in env.items()), str(BIN_DIR / call.prog), *call.args]
    return command if call.user == "root" else ["runuser", "-u", call.user, "--", *command]


def run_one(call: Call, api: str, cwd: Path) -> Outcome:
    """run_one runs one call and returns its outcome."""
    done = subprocess.run(argv_of(call, api), cwd=cwd, input=call.stdin, capture_output=True, text=True,
                          timeout=CALL_TIMEOUT_S)
    return Outcome(done.returncode, done.stdout, done.stderr)


def run_all(calls: Iterable[Call], api: str, cwd: Path, workers: int = 6) -> list[Outcome]:
    """run_all runs calls a few at a time (each is mostly waiting on the service), in order of the answers."""
    with ThreadPoolExecutor(max_workers=workers) as pool:
        return list(pool.map(lambda call: run_one(call, api, cwd), calls))


# --- credentials an attacker may hold ---------------------------------------------------------


def munge_as(user: str, *options: str, payload: bytes = b"") -> str:
    """munge_as is a credential munged encodes for ``user`` (the ``munge`` command run as that user)."""
    argv = ["munge", *options]
    if user != "root":
        argv = ["runuser", "-u", user, "--", *argv]
    done = subprocess.run(argv, input=payload, capture_output=True, timeout=30, check=True)
    return done.stdout.decode().strip()


def forged(credential: str) -> str:
    """forged changes one character in the middle of a credential's body (its MAC no longer matches)."""
    body = credential.removeprefix("MUNGE:").removesuffix(":")
    middle = len(body) // 2
    return "MUNGE:" + body[:middle] + ("A" if body[middle] != "A" else "B") + body[middle + 1 :] + ":"


def expired_credentials(user: str, count: int) -> list[str]:
    """expired_credentials are ``count`` credentials of ``user`` with a 1 s TTL, returned once they expired."""
    made = [munge_as(user, "--ttl", "1") for _ in range(count)]
    time.sleep(2.2)
    return made


def request(socket_path: Path, method: str, target: str, header: str | None = None) -> tuple[int, dict]:
    """request sends one request without a body over the API's Unix socket; (status, JSON answer)."""
    connection = http.client.HTTPConnection("localhost", timeout=30)
    sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    sock.connect(str(socket_path))
    connection.sock = sock
    try:
        connection.request(method, target, headers={"Authorization": header} if header else {})
        response = connection.getresponse()
        return response.status, json.loads(response.read() or b"null")
    finally:
        connection.close()


def used_credential(user: str, socket_path: Path) -> str:
    """used_credential is a real credential of ``user`` for GET /v1/whoami, after the service accepted it once."""
    credential = munge_as(user, payload=request_payload("GET", "/v1/whoami", b""))
    status, body = request(socket_path, "GET", "/v1/whoami", f"MUNGE {credential}")
    assert status == 200 and body["user"] == user, (status, body)
    return credential
