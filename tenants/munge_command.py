"""The ``munge`` and ``unmunge`` commands: the fallback where libmunge cannot be loaded.

One process per call (a few ms). ``unmunge --numeric`` prints its metadata as ``KEY: value``
lines, a blank line, then exactly LENGTH bytes of payload; it exits with the munge error code and
still prints the metadata of an expired or replayed credential.
"""

from __future__ import annotations

import subprocess

from tenants.credential import BAD_CRED, SOCKET_ERROR, Decoded

TIMEOUT_S = 10.0


def encode(payload: bytes, socket: str | None = None, ttl: int | None = None) -> str:
    """encode runs ``munge`` with the payload on stdin; raises OSError with its one-line error."""
    argv = ["munge", *_socket_args(socket), *(["--ttl", str(ttl)] if ttl is not None else [])]
    result = _run(argv, payload)
    if result.returncode != 0:
        raise OSError(_last_line(result.stderr) or f"munge exited {result.returncode}")
    return result.stdout.decode("ascii", "replace").strip()


def decode(credential: str, socket: str | None = None) -> Decoded:
    """decode runs ``unmunge --numeric``; a failure is in ``status``, never raised."""
    try:
        result = _run(["unmunge", "--numeric", *_socket_args(socket)], credential.encode("ascii", "replace"))
    except OSError as exc:
        return Decoded(SOCKET_ERROR, 0, 0, b"", 0, 0, message=f"unmunge: {exc}")
    head, sep, rest = result.stdout.partition(b"\n\n")
    meta = _metadata(head) if sep else {}
    if "STATUS" not in meta:
        # no metadata: unmunge refused the text itself (malformed) or could not reach munged
        status = result.returncode if result.returncode > 0 else BAD_CRED
        return Decoded(status, 0, 0, b"", 0, 0, message=_last_line(result.stderr))
    length = _int(meta.get("LENGTH"))
    return Decoded(
        status=_int(meta["STATUS"]),
        uid=_int(meta.get("UID")),
        gid=_int(meta.get("GID")),
        payload=rest[:length],
        encode_time=_int(meta.get("ENCODE_TIME")),
        ttl=_int(meta.get("TTL")),
        message=_last_line(result.stderr),
    )


def _run(argv: list[str], stdin: bytes) -> subprocess.CompletedProcess[bytes]:
    """_run runs one argv with ``stdin``, capturing bytes; a missing command or a timeout raises OSError."""
    try:
        return subprocess.run(argv, input=stdin, capture_output=True, timeout=TIMEOUT_S, check=False)
    except subprocess.TimeoutExpired as exc:
        raise OSError(f"{argv[0]} timed out after {TIMEOUT_S:g}s") from exc


def _socket_args(socket: str | None) -> list[str]:
    return [f"--socket={socket}"] if socket else []


def _metadata(head: bytes) -> dict[str, str]:
    """_metadata reads ``KEY:   value`` lines."""
    meta: dict[str, str] = {}
    for line in head.decode("ascii", "replace").splitlines():
        key, sep, value = line.partition(":")
        if sep:
            meta[key.strip()] = value.strip()
    return meta


def _int(text: str | None) -> int:
    try:
        return int(text or "0")
    except ValueError:
        return 0


def _last_line(data: bytes) -> str:
    lines = [line.strip() for line in data.decode(errors="replace").splitlines() if line.strip()]
    return lines[-1] if lines else ""
