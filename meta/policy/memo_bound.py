"""When a per-task or per-job memo has outgrown what is live, and how it is cut back.

The daemon keeps memos keyed by task or job id from period to period (shapes, parsed specs).
Pruning each period would walk them all every time; never pruning lets them grow with history.
They are cut back to what is live once they hold twice as many entries as there are live keys
(plus a spare), so the cost of a cut is spread over at least as many periods of growth.
"""

from __future__ import annotations

from collections.abc import Collection, Mapping
from typing import TypeVar

K = TypeVar("K")
V = TypeVar("V")


def outgrown(held: int, live: int, spare: int = 0) -> bool:
    """outgrown tells whether a memo of ``held`` entries should be cut back to its ``live`` keys."""
    return held > 2 * live + spare


def only_keys(memo: Mapping[K, V], live: Collection[K]) -> dict[K, V]:
    """only_keys is the memo's entries whose keys are live."""
    return {key: value for key, value in memo.items() if key in live}
