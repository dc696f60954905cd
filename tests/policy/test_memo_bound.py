"""The shared rule for cutting a memo back to its live keys."""

from meta.policy.memo_bound import only_keys, outgrown


def test_a_memo_is_cut_only_past_twice_the_live_keys_plus_the_spare() -> None:
    assert not outgrown(held=20, live=10)
    assert outgrown(held=21, live=10)
    assert not outgrown(held=1020, live=10, spare=1000)
    assert outgrown(held=1021, live=10, spare=1000)


def test_only_the_live_keys_are_kept() -> None:
    assert only_keys({"a": 1, "b": 2, "c": 3}, {"a", "c", "z"}) == {"a": 1, "c": 3}
