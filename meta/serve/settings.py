"""The daemon's settings: one dataclass whose defaults are the daemon's own, so none is written twice.

``metasched serve`` reads them from a settings file (``settings_file.py``), then lets its flags
(and their environment variables) override them one by one. The defaults come from the classes
that use them (``DaemonConfig``, ``LaunchSettings``, ``ReconcileSettings``, ``DecisionLogSettings``,
the admission bucket, the secrets root): change one there and the daemon, ``--help`` and
``deploy/metasched.toml.example``'s check all follow.
"""

from __future__ import annotations

from dataclasses import dataclass, fields, replace
from typing import Any

from meta.cycle.actuate.launch_plan import LaunchSettings
from meta.cycle.apply.decision_log import DecisionLogSettings
from meta.cycle.daemon import DaemonConfig
from meta.cycle.reconcile.settings import ReconcileSettings
from meta.policy.admission import DEFAULT_BURST, DEFAULT_RATE
from meta.serve.api_start import DEFAULT_LISTEN
from tenants.secrets import DEFAULT_ROOT

METRICS_PORT = 9464  # Prometheus' registry lists 9464 for exporters of this kind
METRICS_ADDRESS = "127.0.0.1"  # metrics stay on the host unless a site opens them
LOG_LEVELS = ("DEBUG", "INFO", "WARNING", "ERROR")
OFF_WORDS = ("off", "none", "0")  # a decision retention of no age bound

_DURATION_UNITS = (("d", 86400), ("h", 3600), ("m", 60))


def duration_text(seconds: float | None) -> str:
    """duration_text writes seconds as a duration ``parse_duration_s`` reads back (``7d``, ``90s``; None: ``off``)."""
    if seconds is None:
        return "off"
    for unit, size in _DURATION_UNITS:
        if seconds >= size and seconds % size == 0:
            return f"{int(seconds // size)}{unit}"
    return f"{seconds:g}s"


@dataclass(frozen=True)
class ServeSettings:
    """ServeSettings are everything ``metasched serve`` can be told, by its settings file or its flags."""

    period: float = DaemonConfig.period_s
    leader_lease: float = DaemonConfig.leader_lease_s
    holder: str | None = None  # None: host:pid (DaemonConfig's default_holder)
    submit_timeout: float = DaemonConfig.submit_timeout_s
    submit_parallel: int = DaemonConfig.submit_parallel
    grace: int = LaunchSettings.grace_s
    unknown_window: float = ReconcileSettings.unknown_window_s
    lost_grace: float = ReconcileSettings.lost_grace_s
    dark_cluster_grace: float = ReconcileSettings.dark_grace_s or 600.0
    quiet_max: float = DaemonConfig.quiet_max_s  # a quiet period reuses the last pass this long at most (0: never)
    slurm_bin_dir: str | None = None  # None: PATH
    state_dir: str | None = None  # None: meta.config.paths.default_state_dir()
    log_dir: str | None = None  # None: <state_dir>/logs
    secrets_root: str = DEFAULT_ROOT
    metrics_port: int = METRICS_PORT
    metrics_address: str = METRICS_ADDRESS
    api_socket: str | None = None  # None: api_start.default_socket()
    api_listen: str = DEFAULT_LISTEN
    munge_socket: str | None = None  # None: libmunge's
    job_api: str | None = None  # None: this replica's Unix socket, else its TCP listener
    policy_config: str | None = None  # None: the shipped, tuned policy
    decision_retention: str = duration_text(DecisionLogSettings.max_age_s)
    decision_max_rows: int = DecisionLogSettings.max_rows or 0
    decision_alternatives: int = DecisionLogSettings.alternatives
    managed_partitions: tuple[str, ...] = DaemonConfig.managed_partitions
    submit_rate: float = DEFAULT_RATE
    submit_burst: int = DEFAULT_BURST
    log_level: str = "INFO"
    # a human name for this site (e.g. "production"), for display only: Slurm job tags carry the
    # store's site id (``metasched db current`` shows it), never this name
    site_name: str | None = None
    # the Slurm clusters this site schedules on, each NAME or NAME=/path/slurm.conf (meta/serve/slurm_access.py);
    # none: the one cluster the daemon's own slurm.conf names
    clusters: tuple[str, ...] = ()


NAMES = tuple(f.name for f in fields(ServeSettings))
DEFAULTS = ServeSettings()

# (least, most) a setting may be, for the file and the flags alike (serve_cmd builds its click types from it)
LIMITS: dict[str, tuple[float | None, float | None]] = {
    "period": (0.1, None),
    "leader_lease": (0, None),
    "submit_timeout": (0, None),
    "submit_parallel": (1, 64),
    "grace": (0, None),
    "unknown_window": (0, None),
    "lost_grace": (0, None),
    "dark_cluster_grace": (0, None),
    "quiet_max": (0, 3600),
    "metrics_port": (0, 65535),
    "decision_max_rows": (0, None),
    "decision_alternatives": (0, 20),
    "submit_rate": (0.01, None),
    "submit_burst": (1, None),
}
CHOICES: dict[str, tuple[str, ...]] = {"log_level": LOG_LEVELS}


SITE_NAME_MAX = 64


def check_site_name(name: str | None) -> str | None:
    """check_site_name returns a site name fit for one log line (printable, at most SITE_NAME_MAX characters), else raises ValueError."""
    if name is not None and (not name.strip() or len(name) > SITE_NAME_MAX or not name.isprintable()):
        raise ValueError(f"want 1 to {SITE_NAME_MAX} printable characters, got {name[:80]!r}")
    return name


def split_partitions(text: str) -> tuple[str, ...]:
    """split_partitions reads ``--managed-partitions a,b`` (spaces and empty names dropped)."""
    return tuple(name for name in text.replace(" ", "").split(",") if name)


def with_overrides(base: ServeSettings, overrides: dict[str, Any]) -> ServeSettings:
    """with_overrides is ``base`` with every override that was given (None means "not given")."""
    given = {name: value for name, value in overrides.items() if value is not None}
    unknown = sorted(set(given) - set(NAMES))
    if unknown:  # a programming error (a flag with no setting), not a user's
        raise TypeError(f"not settings of ServeSettings: {', '.join(unknown)}")
    return replace(base, **given)
