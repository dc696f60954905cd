"""Cluster outages as simulation events (issue 26): a dark cluster takes no new work for a while.

During ``[start, end)`` (trace seconds, after load compression) the cluster's nodes are shown to
the policy as down, so nothing new is placed there, and its running attempts as not preemptible:
they run on and end on time, as metasched's real behaviour has it (a dark cluster's attempts stay
*unknown* and run on; nobody can reach them to stop them). When the outage ends the nodes come
back and the policy is called again.
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable
from dataclasses import dataclass

from meta.model.clusters import check_cluster_name

_TEXT = re.compile(r"^\s*([\w-]+)\s*@\s*([\d.]+)\s*h?\s*[-:]\s*([\d.]+)\s*h?\s*$")


@dataclass(frozen=True, slots=True)
class Outage:
    """Outage is one cluster dark from ``start`` to ``end`` (seconds)."""

    cluster: str
    start: float
    end: float

    def __post_init__(self) -> None:
        check_cluster_name(self.cluster)
        if not (math.isfinite(self.start) and math.isfinite(self.end) and self.start < self.end):
            raise ValueError(f"an outage needs start < end, not {self.start!r}..{self.end!r}")

    def covers(self, now: float) -> bool:
        """covers tells whether the cluster is dark at ``now``."""
        return self.start <= now < self.end


def dark_clusters(outages: Iterable[Outage], now: float) -> frozenset[str]:
    """dark_clusters names the clusters dark at ``now``."""
    return frozenset(o.cluster for o in outages if o.covers(now))


def parse_outage(text: str) -> Outage:
    """parse_outage reads ``cluster@START-ENDh`` in trace hours (``c1@48-60``) into an Outage."""
    match = _TEXT.match(text)
    if not match:
        raise ValueError(f"not an outage: {text!r} (want cluster@START-END in trace hours, e.g. c1@48-60)")
    return Outage(match.group(1), 3600.0 * float(match.group(2)), 3600.0 * float(match.group(3)))
