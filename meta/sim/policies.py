"""Policy registry: names accepted by ``--policy`` → schedule(snapshot, config) callables."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

from meta.policy.plan import Plan
from meta.policy.snapshot import Snapshot

PolicyFn = Callable[[Snapshot, Any], Plan]
ALIASES = {"slurm": "slurmlike", "ms": "metasched"}
NAMES = ("fifo", "slurmlike", "metasched")


class PolicyError(ValueError):
    """PolicyError is raised for an unknown or unavailable policy."""


def canonical(name: str) -> str:
    """canonical resolves aliases (``slurm`` → ``slurmlike``) and rejects unknown names."""
    key = ALIASES.get(name.strip().lower(), name.strip().lower())
    if key not in NAMES:
        raise PolicyError(f"unknown policy {name!r} (choose from fifo, slurm, metasched)")
    return key


def resolve(name: str) -> tuple[PolicyFn, Any]:
    """resolve returns the schedule function and its default config for a policy name."""
    key = canonical(name)
    if key == "fifo":
        from meta.policy.fifo import schedule

        return schedule, None
    if key == "slurmlike":
        from meta.policy.slurmlike import SlurmLikeConfig, schedule

        return schedule, SlurmLikeConfig()
    return _metasched()


def _metasched() -> tuple[PolicyFn, Any]:
    """_metasched imports the real metasched policy and the config the simulator tunes."""
    try:
        from meta.policy.scheduler import schedule
    except ImportError as exc:
        raise PolicyError(f"the metasched policy is not available yet ({exc})") from exc
    try:
        from meta.sim.tuning import metasched_config

        return schedule, metasched_config()
    except ImportError:
        return schedule, None
