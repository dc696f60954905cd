"""The job API probe: ``GET /healthz`` at an API address, printed as one JSON line.

Standard library only and self-contained: ``job_api.py`` sends this file's source to a compute node
(``srun ... python3 -I -c <source> ADDRESS TIMEOUT``), where nothing of metasched is installed, and
calls ``probe`` in process for this host.
"""

from __future__ import annotations

import http.client
import json
import socket
import sys
from typing import Any
from urllib.parse import urlsplit


class _UnixConnection(http.client.HTTPConnection):
    """_UnixConnection is HTTP over a Unix socket (a ``unix:///path`` API)."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        """connect opens the Unix socket instead of TCP."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


def connection(address: str, timeout: float) -> http.client.HTTPConnection:
    """connection is an HTTP connection to ``unix:///path`` or ``http://host[:port]`` (raises ValueError otherwise)."""
    parts = urlsplit(address)
    if parts.scheme == "unix" and parts.path.startswith("/"):
        return _UnixConnection(parts.path, timeout)
    if parts.scheme == "http" and parts.hostname:
        return http.client.HTTPConnection(parts.hostname, parts.port or 9465, timeout=timeout)
    raise ValueError(f"not an API address: {address!r}")


def probe(address: str, timeout: float) -> dict[str, Any]:
    """probe asks the API's /healthz: {"ok", "host", "error"}; never raises."""
    host = socket.gethostname()
    try:
        conn = connection(address, timeout)
        try:
            conn.request("GET", "/healthz")
            answer = conn.getresponse()
            body = answer.read(4096)
        finally:
            conn.close()
    except (OSError, ValueError, http.client.HTTPException) as exc:
        return {"ok": False, "host": host, "error": f"{type(exc).__name__}: {exc}"}
    try:
        healthy = answer.status == 200 and json.loads(body).get("status") == "ok"
    except (ValueError, AttributeError):
        healthy = False
    error = None if healthy else f"HTTP {answer.status}, not metasched's /healthz answer"
    return {"ok": healthy, "host": host, "error": error}


if __name__ == "__main__":  # on the node: python3 -I -c <this source> ADDRESS TIMEOUT
    print(json.dumps(probe(sys.argv[1], float(sys.argv[2]))))
