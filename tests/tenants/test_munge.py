"""MUNGE authentication against the real munged: both decode paths (libmunge via ctypes, unmunge).

Valid, forged, expired, replayed and misbound credentials, no or malformed headers, an
unreachable munged; the client's METASCHED_CREDENTIAL_FILE; and a real user (alice, from
``deploy/devcluster up``) encoding with the system Python while the service decodes as root.
"""

from __future__ import annotations

import os
import pwd
import shutil
import subprocess
import time
from pathlib import Path

import pytest

from cli.credentials import CredentialError, authorization_header, credential_for
from tenants import libmunge, munge_command
from tenants.auth import Unauthenticated
from tenants.credential import request_payload
from tenants.munge import MungeAuthenticator, MungeUnavailable, credential_of
from tests.cluster_gate import cluster_required

REPO = Path(__file__).resolve().parents[2]
BACKENDS = ["libmunge", "command"]
REQUEST = ("POST", "/v1/jobs?tenant=tenant-a", b'{"spec_text": "kind: evaluation"}')


def _munged_problem() -> str:
    if shutil.which("munge") is None or shutil.which("unmunge") is None:
        return "munge is not installed"
    try:
        cred = subprocess.run(["munge", "-n"], capture_output=True, timeout=5, check=False)
        back = subprocess.run(["unmunge"], input=cred.stdout, capture_output=True, timeout=5, check=False)
    except (OSError, subprocess.TimeoutExpired) as exc:
        return f"munge failed: {exc}"
    return "" if cred.returncode == 0 and back.returncode == 0 else "munged does not answer"


@pytest.fixture(scope="module", autouse=True)
def munged() -> None:
    """munged must answer: skip without it, fail when the cluster is required (CI)."""
    problem = _munged_problem()
    if problem:
        message = f"{problem}; run `deploy/devcluster up`"
        if cluster_required():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)


@pytest.fixture(params=BACKENDS)
def auth(request: pytest.FixtureRequest) -> MungeAuthenticator:
    return MungeAuthenticator(backend=request.param)


def _header(method: str = REQUEST[0], target: str = REQUEST[1], body: bytes = REQUEST[2], **kw: object) -> str:
    return authorization_header(method, target, body, **kw)  # type: ignore[arg-type]


def _reason(auth: MungeAuthenticator, header: str | None, request: tuple[str, str, bytes] = REQUEST) -> str:
    with pytest.raises(Unauthenticated) as caught:
        auth.authenticate(header, *request)
    assert "\n" not in str(caught.value)
    return str(caught.value)


def test_both_decode_paths_are_available_here_and_auto_picks_libmunge() -> None:
    assert libmunge.load() is not None
    assert MungeAuthenticator().backend == "libmunge"
    assert MungeAuthenticator(backend="command").backend == "command"


def test_a_valid_credential_names_the_caller(auth: MungeAuthenticator) -> None:
    identity = auth.authenticate(_header(), *REQUEST)
    assert (identity.uid, identity.gid) == (os.geteuid(), os.getegid())
    assert identity.user == pwd.getpwuid(os.geteuid()).pw_name


def test_a_credential_from_the_munge_command_decodes_with_libmunge_and_back() -> None:
    payload = request_payload(*REQUEST)
    by_command = "MUNGE " + munge_command.encode(payload)
    assert MungeAuthenticator(backend="libmunge").authenticate(by_command, *REQUEST).uid == os.geteuid()
    lib = libmunge.load()
    assert lib is not None
    by_lib = "MUNGE " + lib.encode(payload)
    assert MungeAuthenticator(backend="command").authenticate(by_lib, *REQUEST).uid == os.geteuid()


def test_a_credential_is_good_for_one_request(auth: MungeAuthenticator) -> None:
    header = _header()
    auth.authenticate(header, *REQUEST)
    assert "replayed" in _reason(auth, header)
    # munged's replay cache is per munged, whichever path decodes
    other = MungeAuthenticator(backend="command" if auth.backend == "libmunge" else "libmunge")
    assert "replayed" in _reason(other, header)


@pytest.mark.parametrize(
    "request_",
    [
        ("GET", REQUEST[1], REQUEST[2]),  # another method
        (REQUEST[0], "/v1/jobs?tenant=tenant-b", REQUEST[2]),  # another target (query included)
        (REQUEST[0], REQUEST[1], REQUEST[2] + b" "),  # another body
    ],
    ids=["method", "target", "body"],
)
def test_a_credential_bound_to_another_request_is_refused(
    auth: MungeAuthenticator, request_: tuple[str, str, bytes]
) -> None:
    assert _reason(auth, _header(), request_) == "credential bound to another request"


def test_a_forged_credential_is_refused(auth: MungeAuthenticator) -> None:
    credential = credential_for(*REQUEST)
    body = credential[len("MUNGE:") : -1]
    middle = len(body) // 2
    forged = "MUNGE:" + body[:middle] + ("A" if body[middle] != "A" else "B") + body[middle + 1 :] + ":"
    assert _reason(auth, f"MUNGE {forged}").startswith("invalid credential")


def test_an_expired_credential_is_refused_by_both_paths() -> None:
    payload = request_payload(*REQUEST)
    lib = libmunge.load()
    assert lib is not None
    made = {backend: [munge_command.encode(payload, ttl=1), lib.encode(payload, ttl=1)] for backend in BACKENDS}
    time.sleep(2.2)
    for backend, credentials in made.items():
        auth = MungeAuthenticator(backend=backend)  # type: ignore[arg-type]
        for credential in credentials:
            assert _reason(auth, f"MUNGE {credential}") == "expired credential"
            # it is munged that refuses it (status 15), not only our own check
            decoded = (lib.decode if backend == "libmunge" else munge_command.decode)(credential, None)
            assert decoded.status in (15, 17)  # 17 once the first decode above recorded it


def test_our_own_ceiling_refuses_a_credential_older_than_max_age(auth: MungeAuthenticator) -> None:
    later = MungeAuthenticator(backend=auth.backend, max_age_s=300, clock=lambda: time.time() + 301)  # type: ignore[arg-type]
    assert _reason(later, _header()) == "expired credential"
    earlier = MungeAuthenticator(backend=auth.backend, clock=lambda: time.time() - 60)  # type: ignore[arg-type]
    assert "future" in _reason(earlier, _header())


@pytest.mark.parametrize(
    ("header", "want"),
    [
        (None, "no credential"),
        ("", "no credential"),
        ("   ", "no credential"),
        ("Bearer abc", "malformed credential"),
        ("MUNGE", "malformed credential"),
        ("MUNGE not-a-credential", "malformed credential"),
        ("MUNGE MUNGE:abc def:", "malformed credential"),
        ("MUNGE MUNGE:" + "A" * 20_000 + ":", "malformed credential"),
        ("MUNGE MUNGE:é:", "malformed credential"),
        ("MUNGE MUNGE:AAAA:", "invalid credential"),  # the right shape, not a credential: munged says so
    ],
)
def test_no_or_malformed_headers_are_refused_in_one_line(auth: MungeAuthenticator, header: str | None, want: str) -> None:
    assert _reason(auth, header).startswith(want)


def test_the_scheme_is_case_insensitive_and_the_header_trimmed(auth: MungeAuthenticator) -> None:
    credential = credential_for(*REQUEST)
    assert auth.authenticate(f"  munge   {credential}  ", *REQUEST).uid == os.geteuid()
    assert credential_of(f"MUNGE {credential}") == credential


def test_an_unreachable_munged_is_the_services_problem(auth: MungeAuthenticator, tmp_path: Path) -> None:
    away = MungeAuthenticator(socket=str(tmp_path / "no.socket"), backend=auth.backend)  # type: ignore[arg-type]
    with pytest.raises(MungeUnavailable, match="munged cannot be reached"):
        away.authenticate(_header(), *REQUEST)


def test_the_socket_option_reaches_munged_on_both_sides(auth: MungeAuthenticator) -> None:
    socket = "/run/munge/munge.socket.2"
    if not Path(socket).exists():
        pytest.skip(f"{socket} is not munged's socket here")
    at = MungeAuthenticator(socket=socket, backend=auth.backend)  # type: ignore[arg-type]
    assert at.authenticate(_header(socket=socket), *REQUEST).uid == os.geteuid()


def test_the_client_cannot_reach_a_missing_socket(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.delenv("METASCHED_CREDENTIAL_FILE", raising=False)
    with pytest.raises(CredentialError, match="cannot get a MUNGE credential") as caught:
        credential_for(*REQUEST, socket=str(tmp_path / "no.socket"))
    assert "\n" not in str(caught.value)


def test_a_credential_file_is_sent_as_is_and_verified_like_any_other(
    auth: MungeAuthenticator, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    path = tmp_path / "cred"
    path.write_text(credential_for(*REQUEST) + "\n")
    monkeypatch.setenv("METASCHED_CREDENTIAL_FILE", str(path))
    header = _header()
    assert auth.authenticate(header, *REQUEST).uid == os.geteuid()
    assert "replayed" in _reason(auth, _header())  # the same file again: it grants nothing more
    with monkeypatch.context() as env:
        env.delenv("METASCHED_CREDENTIAL_FILE")
        path.write_text(credential_for("GET", "/v1/whoami", b""))  # bound to another request
    assert _reason(auth, _header()) == "credential bound to another request"


@pytest.mark.parametrize("content", [b"", b"\n  \n", b"x" * 70_000])
def test_an_empty_or_huge_credential_file_is_refused(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch, content: bytes
) -> None:
    path = tmp_path / "cred"
    path.write_bytes(content)
    monkeypatch.setenv("METASCHED_CREDENTIAL_FILE", str(path))
    with pytest.raises(CredentialError, match="holds no credential"):
        credential_for(*REQUEST)
    monkeypatch.setenv("METASCHED_CREDENTIAL_FILE", str(tmp_path / "missing"))
    with pytest.raises(CredentialError, match="cannot read"):
        credential_for(*REQUEST)


def test_a_real_user_encodes_and_the_service_running_as_root_decodes_its_uid(auth: MungeAuthenticator) -> None:
    """alice runs the system Python (stdlib only) from the checkout; the service decodes as root."""
    try:
        alice = pwd.getpwnam("alice")
    except KeyError:
        message = "no user alice: run `deploy/devcluster up`"
        if cluster_required():
            pytest.fail(message, pytrace=False)
        pytest.skip(message)
    if os.geteuid() != 0:
        pytest.skip("runuser needs root")
    code = (
        "import sys; sys.path.insert(0, sys.argv[1]); "
        "from cli.credentials import credential_for; "
        "print(credential_for(sys.argv[2], sys.argv[3], sys.argv[4].encode()))"
    )
    method, target, body = REQUEST
    result = subprocess.run(
        ["runuser", "-u", "alice", "--", "/usr/bin/python3", "-I", "-c", code, str(REPO), method, target, body.decode()],
        capture_output=True, text=True, timeout=30, check=False, cwd="/",
    )
    assert result.returncode == 0, result.stderr
    identity = auth.authenticate(f"MUNGE {result.stdout.strip()}", *REQUEST)
    assert (identity.uid, identity.gid, identity.user) == (alice.pw_uid, alice.pw_gid, "alice")


def test_without_libmunge_both_sides_fall_back_to_the_commands(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(libmunge, "load", lambda: None)
    monkeypatch.delenv("METASCHED_CREDENTIAL_FILE", raising=False)
    auth = MungeAuthenticator()
    assert auth.backend == "command"
    assert auth.authenticate(_header(), *REQUEST).uid == os.geteuid()
    with pytest.raises(OSError, match="cannot be loaded"):
        MungeAuthenticator(backend="libmunge")
