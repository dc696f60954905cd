"""ApiClient: the CLI's side of the API, standard library only (``http.client`` over a Unix socket or TCP).

Each request carries ``Authorization: MUNGE <credential>``, a credential bound to exactly this
request's method, target (path and query as sent) and body (``cli.credentials``). Answers are
JSON; an error answer becomes ``ApiError`` whose exit code follows docs/identity.md §2 (400 and
422: 2, anything else: 1). Nothing here imports the store, the models or the service.
"""

from __future__ import annotations

import http.client
import json
import socket
import threading
import time
from collections.abc import Callable, Iterator, Mapping
from typing import Any
from urllib.parse import quote, urlencode, urlsplit

API_ENV = "METASCHED_API"
DEFAULT_API = "unix:///run/metasched/api.sock"
DEFAULT_TIMEOUT_S = 120.0  # a 20,000-partition submit takes seconds; a hung service should not hang scripts
# a live API accepts a TCP connection in milliseconds: an address cut off by the network (packets
# dropped, no refusal) fails a command in this long instead of the whole answer timeout; 15 s
# leaves room for Linux's SYN retries at 1, 3 and 7 s, so a lossy link still connects
CONNECT_TIMEOUT_S = 15.0
MAX_RESPONSE_BYTES = 512 * 1024 * 1024
USAGE_STATUSES = frozenset({400, 413, 414, 422})
# a busy service (503 Busy: too many requests or connections, meta/service/request_gate.py) did
# not look at the request, so any request is sent again, for this long at most: long enough to
# ride out a burst (a flooding user's idle connections are closed within seconds), short enough
# that a script sees the failure
BUSY_WAIT_S = 15.0
BUSY = "Busy"

Credential = Callable[[str, str, bytes], str]
Transport = Callable[[str, str, bytes | None, dict[str, str]], tuple[int, bytes]]
"""Transport sends (method, target, body, headers) and returns (status, body): local mode's in-process app."""


class ApiError(Exception):
    """ApiError is an error answer of the API: its status, error type and one-line message."""

    def __init__(self, status: int, error: str, message: str, problems: list[str] | None = None):
        super().__init__(message)
        self.status = status
        self.error = error
        self.message = message
        self.problems = problems or []

    @property
    def exit_code(self) -> int:
        """exit_code is 2 for a refused request or spec (400, 413, 414, 422), else 1."""
        return 2 if self.status in USAGE_STATUSES else 1


class ApiUnreachable(Exception):
    """ApiUnreachable: no answer from the API address (nothing listening, refused, timed out)."""


class Unanswered(ApiUnreachable):
    """Unanswered: the request went out but no answer came back (the service may or may not have acted)."""


class NotSent(ApiUnreachable):
    """NotSent: the connection was closed before the whole request went out (the service cannot have acted on it)."""


class BadAddress(ValueError):
    """BadAddress: --api / METASCHED_API is not ``unix:///path`` or ``http://host:port``."""


def segment(value: str) -> str:
    """segment percent-encodes one path segment (a job ref or a name never adds a path level)."""
    return quote(value, safe="")


class _UnixConnection(http.client.HTTPConnection):
    """_UnixConnection is HTTP/1.1 over a Unix stream socket."""

    def __init__(self, path: str, timeout: float):
        super().__init__("localhost", timeout=timeout)
        self.socket_path = path

    def connect(self) -> None:
        """connect opens the Unix socket instead of a TCP connection."""
        sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
        sock.settimeout(self.timeout)
        try:
            sock.connect(self.socket_path)
        except OSError:
            sock.close()
            raise
        self.sock = sock


class _TcpConnection(http.client.HTTPConnection):
    """_TcpConnection is HTTP/1.1 over TCP whose connect waits at most CONNECT_TIMEOUT_S (the answer, the whole timeout)."""

    def connect(self) -> None:
        """connect opens the TCP connection within CONNECT_TIMEOUT_S, then gives the socket the answer timeout."""
        answer_timeout = self.timeout
        self.timeout = min(answer_timeout, CONNECT_TIMEOUT_S)
        try:
            super().connect()
        finally:
            self.timeout = answer_timeout
        self.sock.settimeout(answer_timeout)


class ApiClient:
    """ApiClient sends authenticated JSON requests to one API address."""

    def __init__(
        self,
        address: str,
        credential: Credential | None = None,
        *,
        timeout: float = DEFAULT_TIMEOUT_S,
        connect_wait_s: float = 0.0,
        busy_wait_s: float = BUSY_WAIT_S,
        transport: Transport | None = None,
    ):
        self.address = address
        # ``transport``: requests go to it instead of a socket (local mode runs the service's app in process)
        self._transport = transport
        self._connect = _connector(address, timeout) if transport is None else None
        # once connected, sending and every read of the answer end by this long together: a socket
        # timeout bounds each read alone, and a lossy link that trickles the answer resets it
        self.timeout = timeout
        self._credential = credential
        # how long to keep trying while nothing listens (a daemon restarting on its socket): only
        # the connection is retried, never a request that was sent
        self.connect_wait_s = connect_wait_s
        # how long to keep sending again while the service says it is busy (at least connect_wait_s)
        self.busy_wait_s = max(busy_wait_s, connect_wait_s)

    def call(
        self,
        method: str,
        path: str,
        *,
        query: Mapping[str, Any] | None = None,
        body: Any = None,
        headers: Mapping[str, str] | None = None,
        retry_unanswered: bool = False,
    ) -> Any:
        """call sends one request (with extra ``headers``) and returns the decoded JSON answer (raises ApiError or ApiUnreachable).

        ``retry_unanswered`` sends the request again (with a fresh credential: MUNGE refuses a
        replayed one) when it went out but no answer came back, for ``connect_wait_s``; only for
        requests the service makes idempotent, such as an attempt's commit. Any request is sent
        again while the service answers ``503 Busy`` or closes the connection before the request
        went out (neither acted on it), for ``busy_wait_s``.
        """
        extra = dict(headers or {})
        # a list or tuple value repeats its key (``?state=PD&state=R``)
        params = {
            key: [str(v) for v in value] if isinstance(value, list | tuple) else str(value)
            for key, value in (query or {}).items()
            if value is not None and value != [] and value != ()
        }
        target = path + ("?" + urlencode(params, doseq=True) if params else "")
        data = b"" if body is None else json.dumps(body, ensure_ascii=False, separators=(",", ":")).encode("utf-8")
        sent = {
            **extra,
            "Authorization": f"MUNGE {self._credential_for(method, target, data)}",
            "Accept": "application/json",
        }
        if body is not None:
            sent["Content-Type"] = "application/json"
        pauses = _backoff(self.connect_wait_s if retry_unanswered else 0.0)
        busy = _backoff(self.busy_wait_s)
        while True:
            try:
                status, raw = self._exchange(method, target, data if body is not None else None, sent)
                return _decode(status, raw)
            except Unanswered:
                pause = next(pauses, None)
                if pause is None:
                    raise
            except (NotSent, ApiError) as exc:
                pause = next(busy, None) if _not_acted_on(exc) else None
                if pause is None:
                    raise
            time.sleep(pause)
            sent["Authorization"] = f"MUNGE {self._credential_for(method, target, data)}"

    def _credential_for(self, method: str, target: str, data: bytes) -> str:
        if self._credential is None:
            from cli.credentials import credential_for  # munged (or METASCHED_CREDENTIAL_FILE)

            self._credential = credential_for
        return self._credential(method, target, data)

    def _connected(self) -> http.client.HTTPConnection:
        """_connected opens a connection, retrying for ``connect_wait_s`` while nothing listens."""
        pauses = _backoff(self.connect_wait_s)
        while True:
            connection = self._connect()
            try:
                connection.connect()
                return connection
            except OSError as exc:
                connection.close()
                pause = next(pauses, None) if _not_listening(exc) else None
                if pause is None:
                    raise ApiUnreachable(f"cannot reach the metasched API at {self.address}: {_reason(exc)} "
                                         f"(is `metasched serve` running? choose the address with --api or {API_ENV})") from None
                time.sleep(pause)

    def _exchange(self, method: str, target: str, data: bytes | None, headers: dict[str, str]) -> tuple[int, bytes]:
        if self._transport is not None:
            return self._transport(method, target, data, headers)
        connection = self._connected()
        deadline = _Deadline(self.timeout, connection)
        try:
            try:
                connection.request(method, target, body=data, headers=headers)
            except ConnectionError as exc:
                # closed (reset, broken pipe) before the whole request was taken: a peer over its
                # connection limit is closed at once (meta/service/connection_guard.py)
                raise NotSent(
                    f"the metasched API at {self.address} closed the connection: {_reason(exc)}"
                ) from None
            response = connection.getresponse()
            raw = response.read(MAX_RESPONSE_BYTES + 1)
            if deadline.expired:  # cut mid-answer: what was read may end early without an error
                raise TimeoutError("the deadline cut the answer short")
        except (OSError, http.client.HTTPException) as exc:
            # the request went out: the service may have acted on it (a network that loses answers),
            # so say so rather than suggest nothing is running
            reason = f"no whole answer within {self.timeout:g} s" if deadline.expired else _reason(exc)
            raise Unanswered(f"cannot reach the metasched API at {self.address}: {reason} after the request "
                             f"was sent, so it may have been done (a submit with the same --key is safe to repeat)") from None
        finally:
            deadline.cancel()
            connection.close()
        if len(raw) > MAX_RESPONSE_BYTES:
            raise ApiUnreachable(f"the answer of {self.address} is larger than {MAX_RESPONSE_BYTES >> 20} MiB")
        return response.status, raw


class _Deadline:
    """_Deadline shuts a connection's socket once ``seconds`` have passed, so a blocked send or read ends then."""

    def __init__(self, seconds: float, connection: http.client.HTTPConnection):
        self.expired = False
        self._timer = threading.Timer(seconds, self._cut, [connection])
        self._timer.daemon = True
        self._timer.start()

    def cancel(self) -> None:
        """cancel disarms the cut (the exchange ended in time, or failed on its own)."""
        self._timer.cancel()

    def _cut(self, connection: http.client.HTTPConnection) -> None:
        self.expired = True
        sock = connection.sock
        if sock is not None:
            try:
                sock.shutdown(socket.SHUT_RDWR)  # wakes the thread blocked in recv or send on it
            except OSError:
                pass  # already closed: the exchange ended meanwhile


def _backoff(wait_s: float) -> Iterator[float]:
    """_backoff yields the pauses between tries (0.2 s, doubling up to 5 s) while ``wait_s`` from now lasts."""
    deadline = time.monotonic() + wait_s
    delay = 0.2
    while time.monotonic() + delay <= deadline:
        yield delay
        delay = min(delay * 2, 5.0)


def _not_acted_on(exc: Exception) -> bool:
    """_not_acted_on tells a request the service certainly did not act on: not sent whole, or answered 503 Busy."""
    return isinstance(exc, NotSent) or (isinstance(exc, ApiError) and exc.status == 503 and exc.error == BUSY)


def _not_listening(exc: OSError) -> bool:
    """_not_listening tells a refused or missing listener (nothing was sent) from other failures."""
    return isinstance(exc, FileNotFoundError | ConnectionRefusedError)


def _connector(address: str, timeout: float) -> Callable[[], http.client.HTTPConnection]:
    """_connector makes connections for ``unix:///path`` or ``http://host[:port]`` (no path prefix)."""
    parts = urlsplit(address)
    if parts.scheme == "unix" and not parts.netloc and parts.path.startswith("/"):
        return lambda: _UnixConnection(parts.path, timeout)
    if parts.scheme == "http" and parts.hostname and parts.path in ("", "/") and not parts.query:
        try:
            host, port = parts.hostname, parts.port or 9465
        except ValueError:
            raise BadAddress(f"bad port in API address {address!r}") from None
        return lambda: _TcpConnection(host, port, timeout=timeout)
    raise BadAddress(f"not an API address: {address!r} (use unix:///run/metasched/api.sock or http://host:9465)")


def _decode(status: int, raw: bytes) -> Any:
    """_decode turns an answer into JSON, or an error answer into ApiError."""
    try:
        value = json.loads(raw) if raw else None
    except ValueError:
        value = None
        if status < 400:
            raise ApiError(status, "BadAnswer", f"the API answered HTTP {status} with something that is not JSON") from None
    if status < 400:
        return value
    if isinstance(value, dict) and isinstance(value.get("message"), str):
        problems = value.get("problems")
        return_problems = [p for p in problems if isinstance(p, str)] if isinstance(problems, list) else []
        raise ApiError(status, str(value.get("error") or "Error"), value["message"], return_problems)
    raise ApiError(status, "HTTPError", f"the API answered HTTP {status}")


def _reason(exc: BaseException) -> str:
    """_reason is a short human reason for a transport failure."""
    if isinstance(exc, FileNotFoundError):
        return "no such socket"
    if isinstance(exc, ConnectionRefusedError):
        return "connection refused"
    if isinstance(exc, PermissionError):
        return "permission denied"
    if isinstance(exc, TimeoutError | socket.timeout):
        return "timed out"
    return getattr(exc, "strerror", None) or str(exc) or type(exc).__name__
