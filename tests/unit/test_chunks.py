"""Long id lists read in slices (meta/store/chunks.py)."""

from __future__ import annotations

from meta.store.chunks import IN_LIST, chunked


def test_chunked_covers_every_item_once_in_order_and_within_the_size() -> None:
    items = list(range(2_501))
    parts = list(chunked(items))
    assert [len(p) for p in parts] == [IN_LIST, IN_LIST, 501]
    assert [i for p in parts for i in p] == items
    assert list(chunked([1, 2, 3], 2)) == [[1, 2], [3]]


def test_chunked_of_nothing_yields_nothing() -> None:
    assert list(chunked([])) == []
