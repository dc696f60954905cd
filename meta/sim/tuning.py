"""tuning: the SchedulerConfig the simulator passes to the metasched policy (documented choices)."""

from __future__ import annotations

from typing import Any


def metasched_config(**overrides: Any):
    """metasched_config is the policy's production defaults plus the overrides given."""
    from meta.policy.config import SchedulerConfig

    return SchedulerConfig(**overrides)
