"""PeerPace: each peer's requests paced by a token bucket, the excess made to wait on the event loop, not refused.

The API serves requests in a thread of ``metasched serve``, sharing the interpreter with the
cycle: a user who sends requests as fast as one machine allows — invented methods answered 401,
oversized batches answered 400, job-side calls with made-up proofs — takes half of the
interpreter from the cycle, and the period stretched to 1.4-2.4x its median on the dev cluster
(issue 22, ``benchmarks/bench_hostile.py``). One peer (a Unix user, an IP address) now gets
``rate`` tokens a second, up to ``burst``; a request costs one token plus one per started
``BYTES_PER_TOKEN`` of its declared body, since the body is what parsing costs. Past the bucket
the request waits (``asyncio.sleep``: no CPU) until its tokens are there, so a steady caller only
slows down; a wait past ``max_wait_s`` is answered ``503 Busy`` (the client sends it again).
An in-process caller (no peer in the scope) is not paced.
"""

from __future__ import annotations

import time
from collections.abc import Callable
from dataclasses import dataclass, field

from meta.policy.admission import TokenBucket
from meta.service.http_guard import Scope, content_length

DEFAULT_RATE = 50.0  # tokens a second per peer: far above a person's commands, a tenth of a flood's
DEFAULT_BURST = 500  # a peer may spend this much at once (a burst of job-side commits)
DEFAULT_MAX_WAIT_S = 5.0  # a request waits at most this long for its tokens, then 503 Busy
BYTES_PER_TOKEN = 4096
MAX_PEERS = 4096  # buckets kept; past it the full (idle) ones are dropped


def request_cost(scope: Scope) -> int:
    """request_cost is one token plus one per started BYTES_PER_TOKEN of the declared Content-Length (1 without one)."""
    size = content_length(scope) or 0  # a bad header is the body guard's to refuse
    return 1 + -(-size // BYTES_PER_TOKEN)


@dataclass
class PeerPace:
    """PeerPace says how long a peer's request must wait for its tokens (None: longer than it may)."""

    rate: float = DEFAULT_RATE
    burst: int = DEFAULT_BURST
    max_wait_s: float = DEFAULT_MAX_WAIT_S
    clock: Callable[[], float] = time.monotonic
    buckets: dict[str, TokenBucket] = field(default_factory=dict)  # touched only on the event loop's thread

    def delay(self, peer: str, cost: int) -> float | None:
        """delay takes ``cost`` tokens from ``peer`` and returns the seconds to wait first (None: refused, nothing taken)."""
        now = self.clock()
        bucket = self.buckets.get(peer) or self._new_bucket(peer, now)
        # a request larger than the bucket still passes, after a full refill
        return bucket.reserve(min(cost, self.burst), now, self.max_wait_s)

    def _new_bucket(self, peer: str, now: float) -> TokenBucket:
        """_new_bucket is a full bucket for ``peer``, room made by forgetting idle peers (or the oldest)."""
        if len(self.buckets) >= MAX_PEERS:
            self._drop_idle(now)
        if len(self.buckets) >= MAX_PEERS:  # all busy: the oldest goes (it starts full again)
            del self.buckets[next(iter(self.buckets))]
        bucket = self.buckets[peer] = TokenBucket(self.rate, self.burst, now)
        return bucket

    def _drop_idle(self, now: float) -> None:
        """_drop_idle forgets the peers whose buckets have refilled (a new bucket would start the same)."""
        for peer, bucket in list(self.buckets.items()):
            if bucket.wait_for(self.burst, now) == 0.0:
                del self.buckets[peer]
