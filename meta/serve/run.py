"""The daemon's start-up: from ServeSettings to a running cycle and API (``metasched serve`` calls it).

It opens nothing the caller did not: the store comes in as an opened ``Service`` (the command
opens it, making a new store's schema). A setting that cannot work raises ServeError with the
exit code the command exits with (2: a usage error, 1: the start failed).

A store behind this version's schema is not migrated here (docs/upgrades.md): the replica says
so in its log and waits — no API, no lead — until ``metasched db upgrade`` has run, which checks
whether older replicas may still run beside the pending migrations. A store migrated by a newer
metasched refuses the start (exit 1).
"""

from __future__ import annotations

import logging
import signal
import threading
import time
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from types import FrameType
from typing import Any

from meta.config.paths import default_state_dir
from meta.config.policy_file import PolicyFileError, load_policy_config
from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.apply.decision_log import DecisionLogSettings
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.metrics import Metrics
from meta.cycle.reconcile.settings import ReconcileSettings
from meta.policy.config import SchedulerConfig
from meta.serve.api_start import is_socket, listen_for, start_api
from meta.serve.collector import tune_collector
from meta.serve.settings import ServeSettings, check_site_name
from meta.serve.settings_file import retention_s
from meta.serve.slurm_access import parse_clusters, slurm_client
from meta.serve.state_dir import prepare_daemon_files
from meta.service.api import Service
from meta.service.server import ApiServer, ApiStartError
from meta.store.schema_plan import SchemaBehind, SchemaNewer

EXIT_ERROR, EXIT_USAGE = 1, 2
_LOG = logging.getLogger("metasched.serve")


class ServeError(Exception):
    """ServeError: the daemon cannot start as set; ``code`` is the exit code (2 usage, 1 failure)."""

    def __init__(self, message: str, code: int = EXIT_USAGE):
        super().__init__(message)
        self.code = code


@dataclass(frozen=True)
class RunMode:
    """RunMode is how this one run goes, beside the settings: flags only, never in the file."""

    once: bool = False  # a single period, its report returned
    exit_when_idle: bool = False  # stop once no task waits and no attempt is live
    no_api: bool = False  # a replica that only schedules


def check_settings(settings: ServeSettings) -> SchedulerConfig:
    """check_settings refuses what would fail later (before the store is opened) and reads the policy file."""
    decision_log(settings)
    try:
        check_site_name(settings.site_name)
    except ValueError as exc:
        raise ServeError(f"bad --site-name: {exc}") from None
    check_clusters(settings)
    return scheduler_config(settings.policy_config)


def check_clusters(settings: ServeSettings) -> None:
    """check_clusters refuses a bad ``clusters`` list, and adoption on several clusters (not built yet)."""
    try:
        clusters = parse_clusters(settings.clusters)
    except ValueError as exc:
        raise ServeError(f"bad --clusters: {exc}") from None
    if clusters.several and settings.managed_partitions:
        raise ServeError("--managed-partitions works on a single cluster only: adopting plain sbatch jobs "
                         "across several clusters is not supported yet")


def serve(
    settings: ServeSettings, open_service: Callable[[], Service], mode: RunMode = RunMode()
) -> dict[str, Any] | None:
    """serve runs the daemon (and the API) until SIGTERM or SIGINT; with ``mode.once``, one period and its report.

    ``open_service`` opens the store (making a new store's schema; SchemaBehind for an older one,
    which ``open_at_head`` waits out): called only once the settings passed their checks, so a bad
    setting never creates a store.
    """
    scheduler = check_settings(settings)
    stop = threading.Event()
    if not mode.once:

        def _stop(signum: int, _frame: FrameType | None) -> None:
            _LOG.info("signal %s: finishing the period and stopping", signum)
            stop.set()

        signal.signal(signal.SIGTERM, _stop)
        signal.signal(signal.SIGINT, _stop)
    service = open_at_head(open_service, stop, settings.period, once=mode.once)
    if service is None:
        return None  # stopped while waiting for `metasched db upgrade`
    files = prepare_daemon_files(settings.state_dir or default_state_dir(), service.db.url, settings.log_dir)
    metrics = Metrics()
    client = slurm_client(settings.clusters, bin_dir=settings.slurm_bin_dir, observer=metrics)
    api = None if mode.no_api or mode.once else start_api_for(settings, service.db.url, files.state_dir,
                                                              metrics, str(files.log_dir), scheduler)  # fmt: skip
    config = daemon_config(settings, scheduler, str(files.log_dir),
                           settings.job_api or (api.addresses()[0] if api is not None else None))  # fmt: skip
    daemon = Daemon(service.db, client, config, metrics)
    tune_collector()
    if mode.once:
        return _one_period(daemon, settings.submit_timeout)
    if settings.metrics_port:
        metrics.serve(settings.metrics_port, settings.metrics_address)
    _LOG.info("serving as %s, period %.1fs, %s", config.holder, settings.period, site_line(daemon.site, settings.site_name))
    try:
        daemon.run(stop, exit_when_idle=mode.exit_when_idle)
    finally:
        if api is not None:
            api.stop()
    return None


SCHEMA_LOG_EVERY_S = 60.0  # a replica waiting for `db upgrade` says so again this often


def open_at_head(
    open_service: Callable[[], Service], stop: threading.Event, period_s: float, *, once: bool = False
) -> Service | None:
    """open_at_head opens the store once its schema is this version's; None when ``stop`` was set meanwhile.

    While the store is behind, the replica neither serves the API nor leads: it logs why (the
    pending migrations and whether each is online-safe) and looks again every period. ``once``
    (a single period) fails at once instead; a schema newer than this version fails the start.
    """
    said_at: float | None = None
    while True:
        try:
            service = open_service()
        except SchemaNewer as exc:
            raise ServeError(f"{exc}: this replica does not start", EXIT_ERROR) from None
        except SchemaBehind as exc:
            if once:
                raise ServeError(str(exc), EXIT_ERROR) from None
            if said_at is None or time.monotonic() - said_at >= SCHEMA_LOG_EVERY_S:
                _LOG.warning("%s; not serving the API nor leading until it has (looking again every %.0f s)",
                             exc, max(1.0, period_s))  # fmt: skip
                said_at = time.monotonic()
            if stop.wait(max(1.0, period_s)):
                return None
            continue
        if said_at is not None:
            _LOG.info("the store is at this version's schema now: starting")
        return service


def site_line(site: str, name: str | None) -> str:
    """site_line names the site in the start-up log: its id (what Slurm job tags carry) and its human name."""
    return f"site {site} ({name})" if name else f"site {site}"


def _one_period(daemon: Daemon, submit_timeout: float) -> dict[str, Any]:
    """_one_period runs one period and waits for its launches, which stream behind it."""
    report = daemon.period()
    daemon.settle_launches(max(60.0, 4 * submit_timeout))
    report.launched += len(daemon.launches.progress().launched)
    daemon.close_launches()
    return dict(report.__dict__)


def daemon_config(settings: ServeSettings, scheduler: SchedulerConfig, log_dir: str, job_api: str | None) -> DaemonConfig:
    """daemon_config is the cycle's configuration from the settings (the holder only when one is set)."""
    config = DaemonConfig(
        period_s=settings.period,
        leader_lease_s=settings.leader_lease,
        submit_timeout_s=settings.submit_timeout,
        submit_parallel=settings.submit_parallel,
        launch=LaunchSettings(log_dir=log_dir, grace_s=settings.grace, api_address=job_api),
        reconcile=ReconcileSettings(unknown_window_s=settings.unknown_window, lost_grace_s=settings.lost_grace,
                                    dark_grace_s=settings.dark_cluster_grace),
        scheduler=scheduler,
        decisions=decision_log(settings),
        managed_partitions=settings.managed_partitions,
        site_name=settings.site_name,
        quiet_max_s=settings.quiet_max,
    )
    if settings.holder:  # else DaemonConfig's own default, host:pid
        config.holder = settings.holder
    return config


def start_api_for(
    settings: ServeSettings, db_url: str, state_dir: Path, metrics: Metrics, log_dir: str,
    scheduler: SchedulerConfig | None = None,
) -> ApiServer:
    """start_api_for serves the API beside the cycle (every replica, leader or standby); a bad address is ServeError."""
    munge = settings.munge_socket
    if munge is not None and not is_socket(munge):
        raise ServeError(f"--munge-socket {munge}: not a socket (where does the site's munged listen? "
                         "see `munged --help`, option --socket)")  # fmt: skip
    try:
        listen = listen_for(settings.api_socket, settings.api_listen, state_dir)
    except ValueError as exc:
        raise ServeError(f"bad --api-listen: {exc}") from None
    if listen.socket_path is None and listen.host is None:
        raise ServeError("--api-socket off and --api-listen off leave the API nowhere to listen: use --no-api")
    try:
        return start_api(db_url, listen, secrets_root=settings.secrets_root, slurm_bin_dir=settings.slurm_bin_dir,
                         munge_socket=munge, registry=metrics.registry, web_key_file=state_dir / "web-key",
                         log_dir=log_dir, submit_rate=settings.submit_rate, submit_burst=settings.submit_burst,
                         priority_ranks=scheduler.priority_classes if scheduler else None)  # fmt: skip
    except ApiStartError as exc:
        raise ServeError(f"cannot start the API: {exc}", EXIT_ERROR) from None


def decision_log(settings: ServeSettings) -> DecisionLogSettings:
    """decision_log is the decision log's settings (a bad retention is a ServeError)."""
    try:
        age = retention_s(settings.decision_retention)
    except ValueError as exc:
        raise ServeError(f"bad --decision-retention: {exc}") from None
    alternatives = settings.decision_alternatives
    return DecisionLogSettings(enabled=alternatives > 0, alternatives=alternatives, max_age_s=age,
                               max_rows=settings.decision_max_rows or None)  # fmt: skip


def scheduler_config(path: str | None) -> SchedulerConfig:
    """scheduler_config is the policy's defaults, or a policy file over them (a bad file is a ServeError)."""
    if path is None:
        return SchedulerConfig()
    try:
        return load_policy_config(path)
    except PolicyFileError as exc:
        raise ServeError(f"bad --policy-config:\n  {str(exc).replace(chr(10), chr(10) + '  ')}") from None
