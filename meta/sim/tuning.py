"""tuning: the SchedulerConfig the simulator and the benchmark pass to the metasched policy.

Policy defaults, except (chosen on the Philly week, philly150; see benchmarks/bench_traces.py):

* ``short_job_weight=10``: inside one tenant and class, a task's turn is its submit time plus
  10 × its runtime estimate, so a tenant's short jobs overtake its own long ones (SJF-like
  within the tenant; tenants still take turns by fair share).
* ``max_wait_s=24 h`` (default 12 h): aging still bounds every wait, but later. With 12 h,
  aged tasks of an over-share tenant jump ahead of a tenant reclaiming its guarantee, take the
  capacity just freed for it and are the cheapest victims next cycle: preemption storms
  (≈10⁵ preemptions in a week).
"""

from __future__ import annotations

from typing import Any

TUNED: dict[str, Any] = {"short_job_weight": 10.0, "max_wait_s": 24 * 3600.0}


def metasched_config(**overrides: Any):
    """metasched_config is the policy's defaults with TUNED and then ``overrides`` applied."""
    from meta.policy.config import SchedulerConfig

    return SchedulerConfig(**(TUNED | overrides))
