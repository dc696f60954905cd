"""tuning: the SchedulerConfig the simulator and the benchmarks pass to the metasched policy.

The shipped defaults (``meta/policy/config.py``) are the tuned setting, chosen by
``benchmarks/tune_policy.py`` (leave-one-week-out over four Philly weeks × three loads; the
procedure and its figures are in docs/benchmarks.md). The simulator, the benchmarks and
``metasched serve`` without a policy file therefore run the same policy.
``tuned-policy.yaml`` beside this module is only an alias of the defaults (an empty mapping),
kept so that ``--policy-config meta/sim/tuned-policy.yaml`` still works.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TUNED_FILE = Path(__file__).with_name("tuned-policy.yaml")
TUNED: dict[str, Any] = yaml.safe_load(TUNED_FILE.read_text(encoding="utf-8")) or {}


def metasched_config(**overrides: Any):
    """metasched_config is the shipped defaults with ``overrides`` applied."""
    from meta.config.policy_file import policy_config_from

    return policy_config_from(TUNED | overrides, source=str(TUNED_FILE))
