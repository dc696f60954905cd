"""The API half of ``metasched serve``: where it listens and how callers are authenticated and authorized.

Production wiring only: MUNGE (``tenants.munge.MungeAuthenticator``) proves the caller's uid,
Slurm's associations (``tenants.associations.AssociationCache``) say what it may do. The API
gets a store connection pool of its own, so a burst of requests never starves the cycle.
"""

from __future__ import annotations

import os
import socket
import stat
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from meta.service.server import ApiServer, ApiStartError, Listen, parse_listen

DEFAULT_ROOT_SOCKET = Path("/run/metasched/api.sock")
DEFAULT_LISTEN = "127.0.0.1:9465"
OFF = "off"


def default_socket(state_dir: Path) -> Path:
    """default_socket is /run/metasched/api.sock for root, else <state-dir>/api.sock (docs/identity.md §1)."""
    return DEFAULT_ROOT_SOCKET if os.geteuid() == 0 else state_dir / "api.sock"


def listen_for(api_socket: str | None, api_listen: str, state_dir: Path) -> Listen:
    """listen_for turns --api-socket / --api-listen (``off`` disables one) into listeners."""
    socket_path = None if api_socket == OFF else Path(api_socket) if api_socket else default_socket(state_dir)
    host = port = None
    if api_listen != OFF:
        host, port = parse_listen(api_listen)
    return Listen(socket_path=socket_path, host=host, port=port)


def is_socket(path: str) -> bool:
    """is_socket tells whether ``path`` is a Unix socket (a munged's), following links."""
    try:
        return stat.S_ISSOCK(os.stat(path).st_mode)
    except OSError:
        return False


def start_api(
    db_url: str, listen: Listen, *, secrets_root: str, slurm_bin_dir: str | None, munge_socket: str | None = None,
    registry: Any = None, web_key_file: Path | None = None, log_dir: str | None = None,
    submit_rate: float | None = None, submit_burst: int | None = None, priority_ranks: Mapping[str, int] | None = None,
) -> ApiServer:
    """start_api opens the API's own store connection and serves it on ``listen`` (raises ApiStartError).

    ``munge_socket`` is the munged that decodes callers' credentials (None: libmunge's default);
    ``registry`` is the Prometheus registry the API's metrics join (the daemon's), None for none;
    ``web_key_file`` holds the web view's signing key (created 0600 when missing; None: a random key
    per process), ``log_dir`` is where jobs of the daemon's user log (the web view shows the path);
    ``submit_rate``/``submit_burst`` are each tenant's submit-rate bucket unless the tenant sets its own
    (None: meta.policy.admission's defaults); ``priority_ranks`` are the policy's class ranks, which
    submit-time priority rights compare (None: the shipped ones).
    """
    from meta.service.api import Service
    from meta.service.http import create_app
    from meta.service.http_metrics import ApiMetrics
    from meta.service.submit_gate import gate_for
    from meta.service.web.auth import WebSettings, load_key
    from slurm_bridge.commands import CliSlurmClient
    from slurm_bridge.runner import CommandRunner
    from tenants.associations import AssociationCache
    from tenants.munge import MungeAuthenticator

    service = Service.open(db_url, migrate=False)  # the daemon brought the schema up already
    if priority_ranks is not None:
        service.priority_ranks = dict(priority_ranks)
    associations = AssociationCache(CliSlurmClient(CommandRunner(bin_dir=slurm_bin_dir)))
    authenticator = MungeAuthenticator(socket=munge_socket)
    metrics = ApiMetrics(registry) if registry is not None else None
    # per-tenant submit limits (issue 16): every submit through this API passes them
    service.gate = gate_for(service.db, submit_rate, submit_burst, metrics.submit_refused if metrics else None)
    try:
        web = WebSettings(key=load_key(web_key_file), log_dir=log_dir) if web_key_file else WebSettings.ephemeral()
        web.log_dir = log_dir
    except (OSError, ValueError) as exc:
        raise ApiStartError(f"web view key: {exc}") from None
    app = create_app(service, authenticator, associations.principal_for, secrets_root=secrets_root, metrics=metrics,
                     web=web)  # fmt: skip
    server = ApiServer(app, listen)
    server.start()
    web.base_url = web_base_url(server.addresses())
    return server


def web_base_url(addresses: list[str]) -> str | None:
    """web_base_url is the API's TCP address as a browser reaches it (a wildcard host becomes this host's name)."""
    for address in addresses:
        if address.startswith("http://"):
            host_port = address.removeprefix("http://")
            host, _, port = host_port.rpartition(":")
            if host in ("0.0.0.0", "[::]"):
                host = socket.getfqdn()
            return f"http://{host}:{port}"
    return None
