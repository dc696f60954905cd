"""``metasched serve``: the scheduling daemon (leader election, reconcile, schedule, actuate).

A thin shell over ``meta.serve``: it parses flags and hands them over. Each default lives once, in
``meta.serve.settings.ServeSettings``: the options show it in ``--help`` from there, and a flag
overrides the settings file (``--config``) only when it was given, on the command line or in its
environment variable (click's parameter source), never by its default.
"""

from __future__ import annotations

import logging
from typing import Any

import click
from click.core import ParameterSource

from cli.client import ApiClient, BadAddress
from cli.context import CliState, pass_state
from cli.errors import EXIT_USAGE, fail, handle_errors
from cli.output import echo_json
from meta.serve.run import RunMode, ServeError
from meta.serve.run import serve as run_daemon
from meta.serve.settings import CHOICES, DEFAULTS, LIMITS, ServeSettings, split_partitions, with_overrides
from meta.serve.settings_file import CONFIG_ENV, SettingsFileError, load_settings
from meta.serve.state_dir import STATE_ENV


def _float(name: str) -> click.ParamType:
    """_float is a float option's type within the setting's LIMITS."""
    least, most = LIMITS.get(name, (None, None))
    return click.FloatRange(least, most) if (least, most) != (None, None) else click.FLOAT


def _int(name: str) -> click.ParamType:
    """_int is an int option's type within the setting's LIMITS."""
    least, most = LIMITS.get(name, (None, None))
    return click.IntRange(_whole(least), _whole(most)) if (least, most) != (None, None) else click.INT


def _whole(bound: float | None) -> int | None:
    return None if bound is None else int(bound)


_GIVEN = (ParameterSource.COMMANDLINE, ParameterSource.ENVIRONMENT)  # a default never overrides the file


@click.command()
@click.option(
    "--config",
    "config_file",
    default=None,
    envvar=CONFIG_ENV,
    type=click.Path(dir_okay=False),
    help="TOML settings file (deploy/metasched.toml.example lists every setting); flags override it.",
)
@click.option("--period", type=_float("period"), default=DEFAULTS.period, show_default=True, help="Seconds per period.")
@click.option("--metrics-port", type=_int("metrics_port"), default=DEFAULTS.metrics_port, show_default=True,
              help="Prometheus port (0 = off).")
@click.option("--metrics-address", default=DEFAULTS.metrics_address, show_default=True)
@click.option("--slurm-bin-dir", default=DEFAULTS.slurm_bin_dir, help="Directory of sbatch/squeue/... (default: PATH).")
@click.option("--submit-timeout", type=_float("submit_timeout"), default=DEFAULTS.submit_timeout, show_default=True,
              help="sbatch timeout (s).")
@click.option(
    "--submit-parallel",
    type=_int("submit_parallel"),
    default=DEFAULTS.submit_parallel, show_default=True,
    envvar="METASCHED_SUBMIT_PARALLEL",
    help="sbatch calls in flight at once.",
)
@click.option("--grace", type=_int("grace"), default=DEFAULTS.grace, show_default=True,
              help="Checkpoint grace before a preemption cancel (s).")
@click.option(
    "--state-dir",
    default=DEFAULTS.state_dir,
    envvar=STATE_ENV,
    help="The daemon's own folder (0700; holds the store URL jobs read). Default: $XDG_STATE_HOME/metasched "
    "or ~/.local/state/metasched; on a multi-node cluster, a folder the nodes share.",
)
@click.option("--log-dir", default=DEFAULTS.log_dir, help="Where job stdout/stderr go (default: <state-dir>/logs).")
@click.option("--secrets-root", default=DEFAULTS.secrets_root, show_default=True, help="Tenant secret files (<root>/<tenant>/<NAME>).")
@click.option("--leader-lease", type=_float("leader_lease"), default=DEFAULTS.leader_lease, show_default=True, help="Leader lease (s).")
@click.option("--unknown-window", type=_float("unknown_window"), default=DEFAULTS.unknown_window, show_default=True,
              help="Look-up window for unknown launches (s).")
@click.option("--lost-grace", type=_float("lost_grace"), default=DEFAULTS.lost_grace, show_default=True,
              help="Silence before an attempt is lost (s).")
@click.option("--dark-cluster-grace", type=_float("dark_cluster_grace"), default=DEFAULTS.dark_cluster_grace,
              show_default=True, help="Several clusters: seconds a cluster may not answer before its inference "
              "partitions are replayed on another (their output commits are fenced; training waits).")
@click.option("--quiet-max", type=_float("quiet_max"), default=DEFAULTS.quiet_max, show_default=True,
              help="Seconds a quiet period (nothing changed) may reuse the last scheduling pass before a full "
              "one (0 = a full pass every period).")
@click.option("--holder", default=DEFAULTS.holder, help="Replica name for leader election (default host:pid).")
@click.option("--once", is_flag=True, help="Run a single period and print its report.")
@click.option("--exit-when-idle", is_flag=True, help="Exit once no task waits and no attempt is live.")
@click.option(
    "--policy-config",
    default=DEFAULTS.policy_config,
    envvar="METASCHED_POLICY_CONFIG",
    type=click.Path(dir_okay=False),
    help="YAML of policy settings over the defaults (the shipped, tuned policy; see docs/benchmarks.md).",
)
@click.option(
    "--api-socket",
    default=DEFAULTS.api_socket,
    help="Unix socket of the API (0666; its folder is created 0755). Default: /run/metasched/api.sock "
    "for root, else <state-dir>/api.sock; 'off' disables it.",
)
@click.option(
    "--api-listen",
    default=DEFAULTS.api_listen, show_default=True,
    help="HOST:PORT of the API over TCP (0.0.0.0:9465 serves login nodes; port 0 picks one); 'off' disables it.",
)
@click.option("--no-api", is_flag=True, help="Serve no API at all (a replica that only schedules).")
@click.option(
    "--munge-socket",
    default=DEFAULTS.munge_socket,
    envvar="METASCHED_MUNGE_SOCKET",
    help="The munged socket that decodes callers' credentials (a site's own munged). Default: libmunge's.",
)
@click.option(
    "--job-api",
    default=DEFAULTS.job_api,
    help="METASCHED_API given to jobs, for their commit, checkpoint and secret calls (default: this "
    "replica's Unix socket, else its TCP listener; on a multi-node cluster, an address the nodes reach).",
)
@click.option("--decision-retention", default=DEFAULTS.decision_retention, show_default=True,
              help="How long the decision log keeps rows (e.g. 12h, 7d; 'off' = no age bound).")
@click.option("--decision-max-rows", type=_int("decision_max_rows"), default=DEFAULTS.decision_max_rows, show_default=True,
              help="Most rows the decision log keeps, newest first (0 = no count bound).")
@click.option("--decision-alternatives", type=_int("decision_alternatives"),
              default=DEFAULTS.decision_alternatives, show_default=True,
              help="Alternatives recorded per decision, of each kind (0 = no decision log).")
@click.option("--managed-partitions", envvar="METASCHED_MANAGED_PARTITIONS",
              default=",".join(DEFAULTS.managed_partitions), show_default=True,
              help="Comma-separated metasched-managed Slurm partitions: plain sbatch jobs that "
              "deploy/slurm/job_submit.lua holds there are adopted (docs/sbatch.md: Plain sbatch, adopted).")
@click.option("--submit-rate", default=DEFAULTS.submit_rate, type=_float("submit_rate"),
              help="Tasks per second each tenant may submit through the API, unless the tenant sets its own "
              f"(`metasched tenant set --submit-rate`). Default: {DEFAULTS.submit_rate:g}.")
@click.option("--submit-burst", default=DEFAULTS.submit_burst, type=_int("submit_burst"),
              help=f"Tasks each tenant may submit at once, unless the tenant sets its own. Default: {DEFAULTS.submit_burst}.")
@click.option("--site-name", default=DEFAULTS.site_name, envvar="METASCHED_SITE_NAME",
              help="A human name for this site (e.g. production), shown in the log only; Slurm job tags carry "
              "the store's site id (`metasched db current`).")
@click.option("--clusters", envvar="METASCHED_CLUSTERS", default=",".join(DEFAULTS.clusters),
              help="Comma-separated Slurm clusters to schedule on, each NAME or NAME=/path/slurm.conf "
              "(default: the one cluster of the daemon's slurm.conf; README: Several Slurm clusters).")
@click.option("--log-level", type=click.Choice(CHOICES["log_level"]), default=DEFAULTS.log_level)
@pass_state
@handle_errors
def serve(
    state: CliState, config_file: str | None, once: bool, exit_when_idle: bool, no_api: bool, **flags: Any
) -> None:
    """Run the scheduler daemon and the API until SIGTERM or SIGINT."""
    settings = settings_for(config_file, given_flags(click.get_current_context(), flags))
    logging.basicConfig(level=settings.log_level, format="%(asctime)s %(levelname)s %(name)s: %(message)s")
    check_job_api(settings.job_api)  # before the store is opened (run_daemon checks the rest first too)
    try:
        report = run_daemon(settings, state.service, RunMode(once=once, exit_when_idle=exit_when_idle, no_api=no_api))
    except ServeError as exc:
        fail(str(exc), exc.code)
        raise  # unreachable: fail exits
    if report is not None:
        echo_json(report)


def given_flags(ctx: click.Context, flags: dict[str, Any]) -> dict[str, Any]:
    """given_flags are the setting flags given on the command line or in their environment, as settings' values."""
    given = {name: value for name, value in flags.items() if ctx.get_parameter_source(name) in _GIVEN}
    if "managed_partitions" in given:
        given["managed_partitions"] = split_partitions(given["managed_partitions"])
    if "clusters" in given:
        given["clusters"] = split_partitions(given["clusters"])
    return given


def settings_for(config_file: str | None, flags: dict[str, Any]) -> ServeSettings:
    """settings_for is the settings file (or the defaults) with the given flags over it; a bad file exits 2."""
    try:
        base = load_settings(config_file) if config_file is not None else DEFAULTS
    except SettingsFileError as exc:
        fail(f"bad --config: {exc}", EXIT_USAGE)
        raise  # unreachable: fail exits
    return with_overrides(base, flags)


def check_job_api(address: str | None) -> None:
    """check_job_api refuses a --job-api that is not an API address (exit 2): every job would fail its calls."""
    if address is None:
        return
    try:
        ApiClient(address)
    except BadAddress as exc:
        fail(f"bad --job-api: {exc}", EXIT_USAGE)
