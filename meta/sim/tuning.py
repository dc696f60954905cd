"""tuning: the SchedulerConfig the simulator and the benchmarks pass to the metasched policy.

The settings, and why each was chosen, are in ``tuned-policy.yaml`` beside this module: the
daemon can run the very same file (``metasched serve --policy-config``).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import yaml

TUNED_FILE = Path(__file__).with_name("tuned-policy.yaml")
TUNED: dict[str, Any] = yaml.safe_load(TUNED_FILE.read_text(encoding="utf-8"))


def metasched_config(**overrides: Any):
    """metasched_config is the policy's defaults with TUNED and then ``overrides`` applied."""
    from meta.config.policy_file import policy_config_from

    return policy_config_from(TUNED | overrides, source=str(TUNED_FILE))
