"""tenant_delays: per-tenant queue delays of a run and how each tenant fares against a baseline run.

Issue 21's rule: *no tenant with ≥ 20 jobs has a mean queue delay above 1.1× its slurm-like mean
(both floored at 60 s)*. This module is the one place that rule is computed — the simulator's
report, ``metasched simulate --json`` and ``benchmarks/tune_policy.py`` all call it.

Definitions (pure functions of a run report, no I/O):

* a tenant's figures are those of its measured, completed jobs (as every queue figure of the
  report): ``jobs``, mean, p95 and max queue delay, and its share ratio x = min(received ÷ fair
  GPU-time, 1) — the value Jain's index is taken over (meta/sim/fairness.py; ``None`` when the
  tenant had no demand in the measured window);
* ratio = max(candidate mean, floor) ÷ max(baseline mean, floor), floor 60 s: below a minute of
  waiting a tenant is not worse off in any sense a user notices, and the floor keeps 1 s vs 20 s
  from reading as 20×;
* a tenant is *compared* when it has ≥ ``min_jobs`` jobs in the candidate or the baseline run
  (either: a policy cannot escape the rule by leaving a tenant's jobs unfinished) and at least
  one job in both (otherwise there is no mean to divide);
* the worst tenant is the compared tenant with the largest ratio (ties: the name first in order).
"""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import asdict, dataclass
from typing import Any

MIN_JOBS = 20  # tenants with fewer jobs are not judged: their mean is one or two jobs' luck
FLOOR_S = 60.0  # both means are floored here before dividing (issue 21)
MAX_TENANT_RATIO = 1.1  # the guard rail: every compared tenant's ratio must be at most this
BASELINE = "slurmlike"  # the policy every tenant is compared with (``--compare ...,slurm,...``)


@dataclass(frozen=True, slots=True)
class TenantDelay:
    """TenantDelay is one tenant's queue delays (seconds) and share ratio in one run."""

    jobs: int
    mean_s: float
    p95_s: float
    max_s: float
    share_ratio: float | None

    def to_dict(self) -> dict[str, Any]:
        """to_dict is the JSON form (the keys of ``tenant_delays`` in ``--json``)."""
        return asdict(self)

    @classmethod
    def from_dict(cls, data: Mapping[str, Any]) -> TenantDelay:
        """from_dict reads the JSON form back (e.g. from a benchmark cache)."""
        share = data.get("share_ratio")
        return cls(
            int(data["jobs"]),
            float(data["mean_s"]),
            float(data["p95_s"]),
            float(data["max_s"]),
            None if share is None else float(share),
        )


def _metrics(result: Mapping[str, Any]) -> Mapping[str, Any]:
    """_metrics accepts a run report (``meta.sim.run``) or its ``metrics`` dict."""
    return result["metrics"] if "metrics" in result else result


def tenant_delays(result: Mapping[str, Any]) -> dict[str, TenantDelay]:
    """tenant_delays is every tenant's jobs, mean/p95/max queue delay and share ratio in a run report."""
    metrics = _metrics(result)
    shares = metrics.get("fairness", {}).get("share_ratio", {})
    out = {}
    for tenant, groups in sorted(metrics["by_tenant"].items()):
        queue = groups["queue"]
        out[tenant] = TenantDelay(
            int(queue["n"]),
            float(queue["mean"]),
            float(queue["p95"]),
            float(queue["max"]),
            shares.get(tenant),
        )
    return out


def floored_ratio(candidate_mean_s: float, baseline_mean_s: float, floor_s: float = FLOOR_S) -> float:
    """floored_ratio is max(candidate, floor) ÷ max(baseline, floor)."""
    return max(candidate_mean_s, floor_s) / max(baseline_mean_s, floor_s)


def tenant_ratios(
    candidate: Mapping[str, TenantDelay],
    baseline: Mapping[str, TenantDelay],
    min_jobs: int = MIN_JOBS,
    floor_s: float = FLOOR_S,
) -> dict[str, float]:
    """tenant_ratios is the floored mean-queue ratio of every compared tenant (see the module doc)."""
    out = {}
    for tenant in sorted(set(candidate) & set(baseline)):
        ours, base = candidate[tenant], baseline[tenant]
        if max(ours.jobs, base.jobs) >= min_jobs and ours.jobs > 0 and base.jobs > 0:
            out[tenant] = floored_ratio(ours.mean_s, base.mean_s, floor_s)
    return out


def worst_tenant_ratio(
    candidate: Mapping[str, TenantDelay],
    baseline: Mapping[str, TenantDelay],
    min_jobs: int = MIN_JOBS,
    floor_s: float = FLOOR_S,
) -> tuple[str, float] | None:
    """worst_tenant_ratio is (tenant, ratio) of the compared tenant worst off, None if no tenant is compared."""
    ratios = tenant_ratios(candidate, baseline, min_jobs, floor_s)
    if not ratios:
        return None
    tenant = min(ratios, key=lambda name: (-ratios[name], name))
    return tenant, ratios[tenant]


def tenant_section(
    report: Mapping[str, Any],
    baseline: Mapping[str, Any] | None,
    min_jobs: int = MIN_JOBS,
    floor_s: float = FLOOR_S,
) -> dict[str, Any]:
    """tenant_section is a run's ``tenant_delays`` JSON: tenants with ≥ min_jobs jobs, their ratios, the worst."""
    ours = tenant_delays(report)
    base = tenant_delays(baseline) if baseline is not None else {}
    ratios = tenant_ratios(ours, base, min_jobs, floor_s) if baseline is not None else {}
    worst = worst_tenant_ratio(ours, base, min_jobs, floor_s) if baseline is not None else None
    shown = {t for t, d in ours.items() if d.jobs >= min_jobs} | set(ratios)
    return {
        "min_jobs": min_jobs,
        "floor_s": floor_s,
        "baseline": None if baseline is None else baseline.get("policy", BASELINE),
        "tenants": {t: ours[t].to_dict() | {"ratio": ratios.get(t)} for t in sorted(shown)},
        "worst": None if worst is None else {"tenant": worst[0], "ratio": worst[1]},
    }
