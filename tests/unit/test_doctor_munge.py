"""metasched doctor, MUNGE: the daemon's munged answers, and decodes what Slurm's munged encodes."""

from __future__ import annotations

from meta.serve.doctor.check import Status
from meta.serve.doctor.munge import PAYLOAD, RoundTrip, auth_socket, munge_key_check, munged_check
from tenants.credential import CRED_INVALID, SOCKET_ERROR, SUCCESS, Decoded


def decoded(status: int = SUCCESS, uid: int = 0, payload: bytes = PAYLOAD, message: str = "") -> Decoded:
    """decoded is a canned munged answer."""
    return Decoded(status, uid, uid, payload, 1_800_000_000, 60, message)


def test_auth_info_names_slurms_munged() -> None:
    assert auth_socket("cred_expire=15,socket=/run/munge/slurm.socket") == "/run/munge/slurm.socket"
    assert auth_socket("cred_expire=15") is None and auth_socket(None) is None


def test_a_round_trip_passes() -> None:
    assert munged_check(None, RoundTrip(decoded=decoded()), 0).status is Status.OK


def test_no_munged_at_the_socket_fails_naming_it() -> None:
    trip = RoundTrip(encode_error='munge: Failed to access "/nope/munge.sock": No such file or directory')
    check = munged_check("/nope/munge.sock", trip, 0)
    assert check.status is Status.FAIL and "no munged answers at /nope/munge.sock" in check.message
    assert "--munge-socket" in check.message


def test_a_munged_that_cannot_decode_or_lies_fails() -> None:
    assert munged_check("/s", RoundTrip(decoded=decoded(SOCKET_ERROR)), 0).status is Status.FAIL
    assert munged_check("/s", RoundTrip(decoded=decoded(CRED_INVALID)), 0).status is Status.FAIL
    assert munged_check("/s", RoundTrip(decoded=decoded(uid=5)), 0).status is Status.FAIL


def test_another_key_fails() -> None:
    check = munge_key_check("/tmp/other.sock", None, RoundTrip(decoded=decoded(CRED_INVALID)), 0o400)
    assert check.status is Status.FAIL and "another key" in check.message and "/tmp/other.sock" in check.message


def test_the_same_munged_or_the_same_key_passes() -> None:
    assert munge_key_check(None, None, None, 0o400).status is Status.OK
    assert munge_key_check("/a", None, RoundTrip(decoded=decoded()), 0o600).status is Status.OK


def test_a_key_others_may_read_fails() -> None:
    check = munge_key_check(None, None, None, 0o644)
    assert check.status is Status.FAIL and "0644" in check.message and "chmod 0400" in check.message


def test_slurms_munged_unreachable_or_the_daemons_down_only_warn_here() -> None:
    assert munge_key_check("/a", None, RoundTrip(encode_error="no socket"), None).status is Status.WARN
    assert munge_key_check("/a", None, RoundTrip(decoded=decoded(SOCKET_ERROR)), None).status is Status.WARN
