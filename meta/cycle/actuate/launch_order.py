"""For step 13 (actuate): the order in which a period's new attempts reach sbatch: the policy's, one tenant at a time.

The launch pool runs a few sbatch calls at once, so when a tenant has many placements in one
period (a flood of short jobs filling the idle GPUs of one type), whatever comes first in the
queue goes out first and the rest wait a wave or two. Taking the attempts in the order the
policy placed them, but one per tenant per round, bounds what a busy tenant costs another's
launch to one sbatch slot per round, whatever the number of its placements.
"""

from __future__ import annotations

from collections.abc import Iterable, Sequence


def by_placement(attempt_ids: Iterable[str], placed: Sequence[str]) -> list[str]:
    """by_placement sorts attempts into the order ``placed`` lists them; others (older ones) first, as they came."""
    rank = {attempt_id: index for index, attempt_id in enumerate(placed)}
    return sorted(attempt_ids, key=lambda attempt_id: rank.get(attempt_id, -1))


def round_robin_by_tenant(attempts: Sequence[tuple[str, str]]) -> list[str]:
    """round_robin_by_tenant takes (attempt id, tenant) in priority order and deals one per tenant per round.

    Tenants take their turns in the order of their first attempt, and each tenant's attempts
    keep their own order.
    """
    queues: dict[str, list[str]] = {}
    for attempt_id, tenant in attempts:
        queues.setdefault(tenant, []).append(attempt_id)
    dealt: list[str] = []
    for depth in range(max((len(q) for q in queues.values()), default=0)):
        dealt.extend(q[depth] for q in queues.values() if depth < len(q))
    return dealt
