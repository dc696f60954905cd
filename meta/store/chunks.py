"""Long id lists read in slices: SQLite bounds the parameters of one statement, PostgreSQL's planner likes short IN lists."""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import TypeVar

T = TypeVar("T")

IN_LIST = 1000  # ids per IN (...) list: well under SQLite's bound on bound parameters (32,766)


def chunked(items: Sequence[T], size: int = IN_LIST) -> Iterator[Sequence[T]]:
    """chunked yields ``items`` in consecutive slices of at most ``size``."""
    for start in range(0, len(items), size):
        yield items[start : start + size]
