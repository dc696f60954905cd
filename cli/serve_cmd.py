"""``metasched serve``: the scheduling daemon (leader election, reconcile, schedule, actuate)."""

from __future__ import annotations

import logging
import signal
import threading
from pathlib import Path
from types import FrameType

import click

from cli.client import ApiClient, BadAddress
from cli.context import CliState, pass_state
from cli.errors import EXIT_ERROR, EXIT_USAGE, fail, handle_errors
from cli.output import echo_json
from cli.serve_api import DEFAULT_LISTEN, is_socket, listen_for, start_api
from cli.state_dir import STATE_ENV, prepare_daemon_files
from meta.config.paths import default_state_dir
from meta.config.policy_file import PolicyFileError, load_policy_config
from meta.cycle.daemon import Daemon, DaemonConfig
from meta.cycle.decision_log import DecisionLogSettings
from meta.cycle.launch_plan import LaunchSettings
from meta.cycle.metrics import Metrics
from meta.cycle.reconcile import ReconcileSettings
from meta.model.durations import parse_duration_s
from meta.policy.admission import DEFAULT_BURST, DEFAULT_RATE
from meta.policy.config import SchedulerConfig
from meta.service.server import ApiServer, ApiStartError
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.runner import CommandRunner
from tenants.secrets import DEFAULT_ROOT


@click.command()
@click.option("--period", default=2.0, show_default=True, type=click.FloatRange(0.1), help="Seconds per period.")
@click.option("--metrics-port", default=9464, show_default=True, type=int, help="Prometheus port (0 = off).")
@click.option("--metrics-address", default="127.0.0.1", show_default=True)
@click.option("--slurm-bin-dir", default=None, help="Directory of sbatch/squeue/... (default: PATH).")
@click.option("--submit-timeout", default=30.0, show_default=True, type=float, help="sbatch timeout (s).")
@click.option(
    "--submit-parallel",
    default=4,
    show_default=True,
    type=click.IntRange(1, 64),
    envvar="METASCHED_SUBMIT_PARALLEL",
    help="sbatch calls in flight at once.",
)
@click.option("--grace", default=60, show_default=True, type=int, help="Checkpoint grace before a preemption cancel (s).")
@click.option(
    "--state-dir",
    default=None,
    envvar=STATE_ENV,
    help="The daemon's own folder (0700; holds the store URL jobs read). Default: $XDG_STATE_HOME/metasched "
    "or ~/.local/state/metasched; on a multi-node cluster, a folder the nodes share.",
)
@click.option("--log-dir", default=None, help="Where job stdout/stderr go (default: <state-dir>/logs).")
@click.option("--secrets-root", default=DEFAULT_ROOT, show_default=True, help="Tenant secret files (<root>/<tenant>/<NAME>).")
@click.option("--leader-lease", default=15.0, show_default=True, type=float, help="Leader lease (s).")
@click.option("--unknown-window", default=15.0, show_default=True, type=float, help="Look-up window for unknown launches (s).")
@click.option("--lost-grace", default=120.0, show_default=True, type=float, help="Silence before an attempt is lost (s).")
@click.option("--holder", default=None, help="Replica name for leader election (default host:pid).")
@click.option("--once", is_flag=True, help="Run a single period and print its report.")
@click.option("--exit-when-idle", is_flag=True, help="Exit once no task waits and no attempt is live.")
@click.option(
    "--policy-config",
    default=None,
    envvar="METASCHED_POLICY_CONFIG",
    type=click.Path(dir_okay=False),
    help="YAML of policy settings over the defaults (the shipped, tuned policy; see README Benchmarks).",
)
@click.option(
    "--api-socket",
    default=None,
    help="Unix socket of the API (0666; its folder is created 0755). Default: /run/metasched/api.sock "
    "for root, else <state-dir>/api.sock; 'off' disables it.",
)
@click.option(
    "--api-listen",
    default=DEFAULT_LISTEN,
    show_default=True,
    help="HOST:PORT of the API over TCP (0.0.0.0:9465 serves login nodes; port 0 picks one); 'off' disables it.",
)
@click.option("--no-api", is_flag=True, help="Serve no API at all (a replica that only schedules).")
@click.option(
    "--munge-socket",
    default=None,
    envvar="METASCHED_MUNGE_SOCKET",
    help="The munged socket that decodes callers' credentials (a site's own munged). Default: libmunge's.",
)
@click.option(
    "--job-api",
    default=None,
    help="METASCHED_API given to jobs, for their commit, checkpoint and secret calls (default: this "
    "replica's Unix socket, else its TCP listener; on a multi-node cluster, an address the nodes reach).",
)
@click.option("--decision-retention", default="7d", show_default=True,
              help="How long the decision log keeps rows (e.g. 12h, 7d; 'off' = no age bound).")
@click.option("--decision-max-rows", default=1_000_000, show_default=True, type=click.IntRange(0),
              help="Most rows the decision log keeps, newest first (0 = no count bound).")
@click.option("--decision-alternatives", default=3, show_default=True, type=click.IntRange(0, 20),
              help="Alternatives recorded per decision, of each kind (0 = no decision log).")
@click.option("--managed-partitions", default="", envvar="METASCHED_MANAGED_PARTITIONS", show_default=True,
              help="Comma-separated metasched-managed Slurm partitions: plain sbatch jobs that "
              "deploy/slurm/job_submit.lua holds there are adopted (README: Plain sbatch, adopted).")
@click.option("--submit-rate", default=None, type=click.FloatRange(min=0.01),
              help="Jobs per second each tenant may submit through the API, unless the tenant sets its own "
              f"(`metasched tenant set --submit-rate`). Default: {DEFAULT_RATE:g}.")
@click.option("--submit-burst", default=None, type=click.IntRange(1),
              help=f"Jobs each tenant may submit at once, unless the tenant sets its own. Default: {DEFAULT_BURST}.")
@click.option("--log-level", default="INFO", type=click.Choice(["DEBUG", "INFO", "WARNING", "ERROR"]))
@pass_state
@handle_errors
def serve(
    state: CliState,
    period: float,
    metrics_port: int,
    metrics_address: str,
    slurm_bin_dir: str | None,
    submit_timeout: float,
    submit_parallel: int,
    grace: int,
    state_dir: str | None,
    log_dir: str | None,
    secrets_root: str,
    leader_lease: float,
    unknown_window: float,
    lost_grace: float,
    holder: str | None,
    once: bool,
    exit_when_idle: bool,
    policy_config: str | None,
    api_socket: str | None,
    api_listen: str,
    no_api: bool,
    munge_socket: str | None,
    job_api: str | None,
    decision_retention: str,
    decision_max_rows: int,
    decision_alternatives: int,
    managed_partitions: str,
    submit_rate: float | None,
    submit_burst: int | None,
    log_level: str,
) -> None:
    """Run the scheduler daemon and the API until SIGTERM or SIGINT."""
    logging.basicConfig(level=log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    _check_job_api(job_api)
    scheduler = _scheduler_config(policy_config)
    service = state.service()  # opens the store and brings the schema to head
    files = prepare_daemon_files(state_dir or default_state_dir(), service.db.url, log_dir)
    metrics = Metrics()
    client = CliSlurmClient(CommandRunner(bin_dir=slurm_bin_dir, observer=metrics))
    api = None
    if not (no_api or once):
        api = _start_api(service.db.url, files.state_dir, api_socket, api_listen, secrets_root, slurm_bin_dir,
                         munge_socket, metrics, str(files.log_dir), (submit_rate, submit_burst))
    config = DaemonConfig(
        period_s=period,
        leader_lease_s=leader_lease,
        submit_timeout_s=submit_timeout,
        submit_parallel=submit_parallel,
        launch=LaunchSettings(
            log_dir=str(files.log_dir), grace_s=grace,
            api_address=job_api or (api.addresses()[0] if api is not None else None),
        ),  # fmt: skip
        reconcile=ReconcileSettings(unknown_window_s=unknown_window, lost_grace_s=lost_grace),
        scheduler=scheduler,
        decisions=_decision_settings(decision_retention, decision_max_rows, decision_alternatives),
        managed_partitions=tuple(name for name in managed_partitions.replace(" ", "").split(",") if name),
    )
    if holder:
        config.holder = holder
    daemon = Daemon(service.db, client, config, metrics)
    if once:
        report = daemon.period()
        # launches stream behind the period: one period on its own waits for them before it exits
        daemon.settle_launches(max(60.0, 4 * submit_timeout))
        report.launched += len(daemon.launches.progress().launched)
        daemon.close_launches()
        echo_json(report.__dict__)
        return
    if metrics_port:
        metrics.serve(metrics_port, metrics_address)
    stop = threading.Event()

    def _stop(signum: int, _frame: FrameType | None) -> None:
        logging.getLogger("metasched.serve").info("signal %s: finishing the period and stopping", signum)
        stop.set()

    signal.signal(signal.SIGTERM, _stop)
    signal.signal(signal.SIGINT, _stop)
    logging.getLogger("metasched.serve").info("serving as %s, period %.1fs", config.holder, period)
    try:
        daemon.run(stop, exit_when_idle=exit_when_idle)
    finally:
        if api is not None:
            api.stop()


def _start_api(
    db_url: str, state_dir: Path, api_socket: str | None, api_listen: str, secrets_root: str,
    slurm_bin_dir: str | None, munge_socket: str | None, metrics: Metrics, log_dir: str | None = None,
    submit_bucket: tuple[float | None, int | None] = (None, None),
) -> ApiServer:
    """_start_api serves the API beside the cycle (every replica, leader or standby); a bad address exits 2."""
    if munge_socket is not None and not is_socket(munge_socket):
        fail(f"--munge-socket {munge_socket}: not a socket (where does the site's munged listen? "
             "see `munged --help`, option --socket)", EXIT_USAGE)
    try:
        listen = listen_for(api_socket, api_listen, state_dir)
    except ValueError as exc:
        fail(f"bad --api-listen: {exc}", EXIT_USAGE)
        raise  # unreachable: fail exits
    if listen.socket_path is None and listen.host is None:
        fail("--api-socket off and --api-listen off leave the API nowhere to listen: use --no-api", EXIT_USAGE)
    try:
        return start_api(db_url, listen, secrets_root=secrets_root, slurm_bin_dir=slurm_bin_dir,
                         munge_socket=munge_socket, registry=metrics.registry,
                         web_key_file=state_dir / "web-key", log_dir=log_dir,
                         submit_rate=submit_bucket[0], submit_burst=submit_bucket[1])
    except ApiStartError as exc:
        fail(f"cannot start the API: {exc}", EXIT_ERROR)
        raise  # unreachable: fail exits


def _check_job_api(address: str | None) -> None:
    """_check_job_api refuses a --job-api that is not an API address (exit 2): every job would fail its calls."""
    if address is None:
        return
    try:
        ApiClient(address)
    except BadAddress as exc:
        fail(f"bad --job-api: {exc}", EXIT_USAGE)


def _decision_settings(retention: str, max_rows: int, alternatives: int) -> DecisionLogSettings:
    """_decision_settings reads the decision log's flags (a bad retention is a usage error)."""
    age: float | None = None
    if retention.strip().lower() not in ("off", "none", "0"):
        try:
            age = parse_duration_s(retention)
        except ValueError as exc:
            fail(f"bad --decision-retention: {exc}", EXIT_USAGE)
    return DecisionLogSettings(enabled=alternatives > 0, alternatives=alternatives, max_age_s=age,
                               max_rows=max_rows or None)  # fmt: skip


def _scheduler_config(path: str | None) -> SchedulerConfig:
    """_scheduler_config is the policy's defaults, or a policy file over them (a bad file exits 2)."""
    if path is None:
        return SchedulerConfig()
    try:
        return load_policy_config(path)
    except PolicyFileError as exc:
        fail(f"bad --policy-config:\n  {str(exc).replace(chr(10), chr(10) + '  ')}", EXIT_USAGE)
        raise  # unreachable: fail exits
