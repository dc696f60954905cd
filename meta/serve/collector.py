"""The garbage collector tuned for a long-running daemon whose period allocates a million short-lived objects.

A period at 50,000 waiting tasks builds snapshot rows, pending tasks, shapes and reasons —
about a million objects, nearly all freed by reference counting before the next period. With
CPython's default thresholds (700, 10, 10) each 700 allocations start a young collection and
every hundredth one a full collection that walks every live object: about 1,100 collections and
a quarter of an idle period at 50,000 waiting (issue 24; ``benchmarks/bench_period.py``). A
young generation of 50,000 objects leaves cyclic garbage — rare here — a little longer in memory
and runs ~70× fewer collections; ``gc.freeze`` moves what start-up built (modules, settings,
the store's metadata) out of the collector's sight for good, so full collections walk only
what periods keep.
"""

from __future__ import annotations

import gc

YOUNG_THRESHOLD = 50_000
MIDDLE_THRESHOLD = 20
OLD_THRESHOLD = 100


def tune_collector() -> None:
    """tune_collector freezes what start-up built and raises the thresholds (call once, after start-up)."""
    gc.collect()
    gc.freeze()
    gc.set_threshold(YOUNG_THRESHOLD, MIDDLE_THRESHOLD, OLD_THRESHOLD)
