"""MUNGE: the daemon's munged answers, and shares its key with Slurm's munged (and so with the login nodes).

The API decodes callers' credentials with the munged at ``munge_socket``; Slurm authenticates with
the munged its AuthInfo names (libmunge's default socket otherwise). A credential one encodes must
decode at the other, or every client is refused (``invalid credential``) while Slurm works on.
Encoding and decoding go through ``tenants`` (libmunge, else the munge/unmunge commands).
"""

from __future__ import annotations

import os
import stat
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path

from meta.serve.doctor.check import Check, fail, first_line, ok, warn
from tenants import libmunge, munge_command
from tenants.credential import CRED_INVALID, DAEMON_ERRORS, SUCCESS, Decoded, status_reason

KEY_FILE = Path("/etc/munge/munge.key")  # munged's default --key-file
DEFAULT_LABEL = "libmunge's default socket"
PAYLOAD = b"metasched doctor"
TTL_S = 60


@dataclass(frozen=True)
class RoundTrip:
    """RoundTrip is one credential encoded at one munged and decoded at another (or the same)."""

    encode_error: str | None = None  # the encoding munged could not be asked
    decoded: Decoded | None = None


def socket_label(socket: str | None) -> str:
    """socket_label names a munged socket in messages."""
    return socket or DEFAULT_LABEL


def auth_socket(auth_info: str | None) -> str | None:
    """auth_socket is the ``socket=`` of slurm.conf's AuthInfo: the munged Slurm uses (None: libmunge's default)."""
    for part in (auth_info or "").split(","):
        key, sep, value = part.strip().partition("=")
        if sep and key.strip().lower() == "socket" and value.strip():
            return value.strip()
    return None


def round_trip(encode_at: str | None, decode_at: str | None) -> RoundTrip:
    """round_trip encodes a credential at one munged and decodes it at another (I/O; failures in the result)."""
    encode, decode = _backend()
    try:
        credential = encode(PAYLOAD, encode_at, TTL_S)
    except OSError as exc:
        return RoundTrip(encode_error=first_line(str(exc)))
    return RoundTrip(decoded=decode(credential, decode_at))


def _backend() -> tuple[Callable[[bytes, str | None, int | None], str], Callable[[str, str | None], Decoded]]:
    """_backend is libmunge when it loads, else the munge/unmunge commands (as the API picks)."""
    lib = libmunge.load()
    if lib is not None:
        return lib.encode, lib.decode
    return munge_command.encode, munge_command.decode


def munged_check(socket: str | None, trip: RoundTrip, euid: int) -> Check:
    """munged_check: the daemon's munged encodes a credential and decodes it back, for this uid and payload."""
    where = socket_label(socket)
    advice = "start munged, or set munge_socket (serve --munge-socket) to where the site's munged listens"
    if trip.encode_error is not None:
        return fail("munged", f"no munged answers at {where} ({trip.encode_error}): {advice}")
    decoded = trip.decoded
    assert decoded is not None  # encoded, so decoded
    if decoded.status in DAEMON_ERRORS:
        return fail("munged", f"munged at {where} does not decode ({decoded.message or status_reason(decoded.status)}): "
                              f"{advice}")  # fmt: skip
    if decoded.status != SUCCESS:
        return fail("munged", f"munged at {where} refuses its own credential ({status_reason(decoded.status)}): "
                              "check its key and clock (munged's log)")  # fmt: skip
    if decoded.payload != PAYLOAD or decoded.uid != euid:
        return fail("munged", f"munged at {where} decoded another payload or uid ({decoded.uid}, not {euid})")
    return ok("munged", f"{where} encodes and decodes")


def key_mode(path: Path = KEY_FILE) -> int | None:
    """key_mode is the key file's permission bits, None when it cannot be seen (another host's, or not root)."""
    try:
        return stat.S_IMODE(os.stat(path).st_mode)
    except OSError:
        return None


def munge_key_check(daemon_socket: str | None, site_socket: str | None, cross: RoundTrip | None,
                    mode: int | None, key_file: Path = KEY_FILE) -> Check:  # fmt: skip
    """munge_key_check: the key is private, and the daemon's munged decodes what Slurm's munged encodes."""
    if mode is not None and mode & 0o077:
        return fail("munge-key", f"{key_file} is mode {mode:04o}: whoever reads it can forge any user's credential; "
                                 f"chmod 0400 {key_file} (owner munge)")  # fmt: skip
    daemon, site = socket_label(daemon_socket), socket_label(site_socket)
    if cross is None:  # the same munged: one key by construction
        return ok("munge-key", f"the daemon's munged is Slurm's ({daemon}): one key")
    if cross.encode_error is not None:
        return warn("munge-key", f"cannot ask Slurm's munged at {site} for a credential ({cross.encode_error}): "
                                 "the daemon's key is not compared")  # fmt: skip
    decoded = cross.decoded
    assert decoded is not None
    if decoded.status == SUCCESS:
        return ok("munge-key", f"the daemon's munged ({daemon}) decodes what Slurm's ({site}) encodes: the same key")
    if decoded.status in DAEMON_ERRORS:
        return warn("munge-key", f"not compared: the daemon's munged at {daemon} does not answer (see munged)")
    if decoded.status == CRED_INVALID:
        return fail("munge-key", f"the daemon's munged ({daemon}) has another key than Slurm's ({site}): every "
                                 "client's credential is refused; give both the site's munge.key and restart them")  # fmt: skip
    return fail("munge-key", f"the daemon's munged ({daemon}) refuses a credential of Slurm's ({site}): "
                             f"{status_reason(decoded.status)}")  # fmt: skip
