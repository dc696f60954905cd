"""The order new attempts reach sbatch: the policy's, one tenant per round (meta/cycle/actuate/launch_order.py)."""

from __future__ import annotations

from meta.cycle.actuate.launch_order import by_placement, round_robin_by_tenant


def test_a_flooding_tenant_takes_one_slot_per_round() -> None:
    flood = [(f"r{i}", "research") for i in range(8)]
    dealt = round_robin_by_tenant([*flood[:5], ("a1", "tenant-a"), *flood[5:], ("b1", "tenant-b"), ("a2", "tenant-a")])
    assert dealt[:3] == ["r0", "a1", "b1"]  # each tenant's first launch is in the first round
    assert dealt[3:5] == ["r1", "a2"]
    assert [d for d in dealt if d.startswith("r")] == [f"r{i}" for i in range(8)]  # a tenant's own order kept
    assert len(dealt) == 11


def test_round_robin_of_nothing_is_nothing() -> None:
    assert round_robin_by_tenant([]) == []


def test_by_placement_follows_the_policy_and_puts_older_attempts_first() -> None:
    assert by_placement(["c", "old", "a", "b"], placed=["a", "b", "c"]) == ["old", "a", "b", "c"]
    assert by_placement(["x", "y"], placed=[]) == ["x", "y"]
