"""ApiServer: the API in a background thread of ``metasched serve``, on a Unix socket and on TCP.

The sockets are bound here, in the caller's thread, so a taken port or a live socket fails the
start-up with one clear line instead of a log entry in a thread. A Unix socket left behind by a
killed daemon (nothing answers on it) is replaced; a live one, or a path that is not a socket,
is never touched. The socket is mode 0666: who may do what is decided by authentication
(MUNGE), not by file modes. uvicorn runs in a thread, where it installs no signal handlers:
the daemon's own SIGTERM/SIGINT handling stops it.
"""

from __future__ import annotations

import errno
import logging
import os
import socket
import stat
import threading
import time
from dataclasses import dataclass, field
from pathlib import Path

import uvicorn

from meta.service.connection_guard import ConnectionLimits, guarded_protocol
from meta.service.http_guard import ASGIApp
from meta.service.request_gate import RequestGate

log = logging.getLogger("metasched.api")

SOCKET_MODE = 0o666
FOLDER_MODE = 0o755
START_TIMEOUT_S = 15.0
STOP_TIMEOUT_S = 10.0


class ApiStartError(Exception):
    """ApiStartError says in one line why the API could not listen."""


@dataclass(frozen=True)
class Listen:
    """Listen is where the API listens: a Unix socket path and/or a TCP host and port (port 0: any)."""

    socket_path: Path | None = None
    host: str | None = None
    port: int | None = None


def parse_listen(value: str) -> tuple[str, int]:
    """parse_listen reads ``HOST:PORT`` (``[::1]:9465`` for IPv6) into (host, port)."""
    host, sep, port = value.rpartition(":")
    host = host.strip("[]")
    if not sep or not host or not port.isascii() or not port.isdigit() or int(port) > 65535:
        raise ValueError(f"{value!r} is not HOST:PORT (e.g. 127.0.0.1:9465)")
    return host, int(port)


@dataclass
class ApiServer:
    """ApiServer serves an ASGI app on the given listeners from a daemon thread."""

    app: ASGIApp
    listen: Listen
    limits: ConnectionLimits = field(default_factory=ConnectionLimits)
    _sockets: list[socket.socket] = field(default_factory=list)
    _server: uvicorn.Server | None = None
    _thread: threading.Thread | None = None
    _socket_inode: tuple[int, int] | None = None

    def start(self) -> None:
        """start binds every listener (or raises ApiStartError) and serves them in a background thread."""
        try:
            if self.listen.socket_path is not None:
                self._sockets.append(self._bind_unix(self.listen.socket_path))
            if self.listen.host is not None:
                self._sockets.append(_bind_tcp(self.listen.host, self.listen.port or 0))
        except BaseException:
            self._close_sockets()
            self._remove_socket_file()
            raise
        config = uvicorn.Config(
            RequestGate(self.app),  # requests in flight bounded, with a reserve for job-side calls
            # connections bounded per peer (uid or IP), with head and body deadlines (issue 22, S1)
            http=guarded_protocol(self.limits),
            lifespan="off",
            access_log=False,
            log_config=None,  # the daemon's logging configuration stays in charge
            timeout_graceful_shutdown=5,
            # not uvicorn's limit_concurrency: it counts idle connections too, so anyone holding
            # 256 of them made it answer 503 to everyone
            limit_concurrency=None,
        )
        self._server = uvicorn.Server(config)
        self._thread = threading.Thread(
            target=self._server.run, kwargs={"sockets": self._sockets}, name="metasched-api", daemon=True
        )
        self._thread.start()
        deadline = time.monotonic() + START_TIMEOUT_S
        while not self._server.started:
            if not self._thread.is_alive() or time.monotonic() > deadline:
                self.stop()
                raise ApiStartError("the API server did not start (see the log)")
            time.sleep(0.01)
        for where in self.addresses():
            log.info("API listening on %s", where)

    def addresses(self) -> list[str]:
        """addresses are the client URLs of every listener (``unix://...``, ``http://host:port``)."""
        found = []
        for sock in self._sockets:
            if sock.family == socket.AF_UNIX:
                found.append(f"unix://{sock.getsockname()}")
            else:
                host, port = sock.getsockname()[:2]
                found.append(f"http://[{host}]:{port}" if ":" in host else f"http://{host}:{port}")
        return found

    def stop(self) -> None:
        """stop asks uvicorn to finish its requests, waits for the thread and removes our socket file."""
        if self._server is not None:
            self._server.should_exit = True
        if self._thread is not None:
            self._thread.join(timeout=STOP_TIMEOUT_S)
        self._close_sockets()
        self._remove_socket_file()

    def _bind_unix(self, path: Path) -> socket.socket:
        """_bind_unix binds the Unix socket (folder 0755 when created, socket 0666), replacing only a stale one."""
        path = Path(path).absolute()
        if not path.parent.exists():
            try:
                path.parent.mkdir(mode=FOLDER_MODE, parents=True)
            except OSError as exc:
                raise ApiStartError(f"cannot create {path.parent}: {exc.strerror}") from None
            os.chmod(path.parent, FOLDER_MODE)  # mkdir's mode is masked by the umask
        _clear_stale_socket(path)
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        try:
            sock.bind(str(path))
            os.chmod(path, SOCKET_MODE)
            sock.listen(128)
        except OSError as exc:
            sock.close()
            raise ApiStartError(f"cannot listen on {path}: {exc.strerror}") from None
        info = os.stat(path)
        self._socket_inode = (info.st_dev, info.st_ino)
        return sock

    def _remove_socket_file(self) -> None:
        """_remove_socket_file unlinks our socket, unless the path now holds someone else's."""
        path = self.listen.socket_path
        if path is None or self._socket_inode is None:
            return
        try:
            info = os.stat(path)
            if (info.st_dev, info.st_ino) == self._socket_inode:
                os.unlink(path)
        except FileNotFoundError:
            pass
        self._socket_inode = None

    def _close_sockets(self) -> None:
        for sock in self._sockets:
            sock.close()
        self._sockets.clear()


def _clear_stale_socket(path: Path) -> None:
    """_clear_stale_socket removes a socket nobody answers on; anything else at ``path`` is an error."""
    try:
        info = os.lstat(path)
    except FileNotFoundError:
        return
    if not stat.S_ISSOCK(info.st_mode):
        raise ApiStartError(f"{path} exists and is not a socket: refusing to replace it")
    probe = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    probe.settimeout(1.0)
    try:
        probe.connect(str(path))
    except OSError as exc:
        if exc.errno not in (errno.ECONNREFUSED, errno.ENOENT):
            raise ApiStartError(f"cannot tell whether {path} is in use: {exc.strerror}") from None
    else:
        raise ApiStartError(f"{path} is in use by another server (another metasched serve?)")
    finally:
        probe.close()
    log.info("removing the stale API socket %s", path)
    path.unlink(missing_ok=True)


def _bind_tcp(host: str, port: int) -> socket.socket:
    """_bind_tcp binds and listens on host:port (IPv4 or IPv6)."""
    try:
        infos = socket.getaddrinfo(host, port, type=socket.SOCK_STREAM, flags=socket.AI_PASSIVE)
    except socket.gaierror as exc:
        raise ApiStartError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    family, kind, proto, _, address = infos[0]
    sock = socket.socket(family, kind, proto)
    try:
        sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
        sock.bind(address)
        sock.listen(128)
    except OSError as exc:
        sock.close()
        raise ApiStartError(f"cannot listen on {host}:{port}: {exc.strerror}") from None
    return sock
