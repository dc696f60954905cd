"""Each peer's requests are paced by its own token bucket: a flood waits, a quiet peer does not (issue 22)."""

from __future__ import annotations

import asyncio

from meta.service.peer_pace import BYTES_PER_TOKEN, MAX_PEERS, PeerPace, request_cost
from meta.service.request_gate import PEER, RequestGate


class _Clock:
    """_Clock is a settable monotonic clock."""

    def __init__(self) -> None:
        self.now = 0.0

    def __call__(self) -> float:
        return self.now


def test_a_burst_passes_at_once_then_each_request_waits_its_share() -> None:
    clock = _Clock()
    pace = PeerPace(rate=10, burst=3, max_wait_s=5, clock=clock)
    assert [pace.delay("uid:2006", 1) for _ in range(3)] == [0.0, 0.0, 0.0]
    assert pace.delay("uid:2006", 1) == 0.1  # one token at 10 a second
    assert pace.delay("uid:2006", 1) == 0.2  # the one before it is still owed


def test_one_peers_flood_leaves_another_peer_its_whole_burst() -> None:
    pace = PeerPace(rate=10, burst=3, clock=_Clock())
    for _ in range(20):
        pace.delay("uid:2006", 1)
    assert pace.delay("uid:2001", 1) == 0.0


def test_a_wait_longer_than_allowed_is_refused_and_takes_nothing() -> None:
    clock = _Clock()
    pace = PeerPace(rate=1, burst=2, max_wait_s=1, clock=clock)
    assert pace.delay("uid:2006", 2) == 0.0
    assert pace.delay("uid:2006", 1) == 1.0  # owes one token
    assert pace.delay("uid:2006", 1) is None  # would wait 2 s
    clock.now = 2.0  # the debt is paid and one token earned
    assert pace.delay("uid:2006", 1) == 0.0


def test_tokens_refill_with_time_up_to_the_burst() -> None:
    clock = _Clock()
    pace = PeerPace(rate=10, burst=3, clock=clock)
    for _ in range(3):
        pace.delay("ip:127.0.0.1", 1)
    clock.now = 100.0
    assert [pace.delay("ip:127.0.0.1", 1) for _ in range(4)] == [0.0, 0.0, 0.0, 0.1]


def test_a_request_costs_one_token_plus_its_declared_body() -> None:
    assert request_cost({"headers": []}) == 1
    assert request_cost({"headers": [(b"content-length", b"0")]}) == 1
    assert request_cost({"headers": [(b"Content-Length", str(BYTES_PER_TOKEN + 1).encode())]}) == 3
    assert request_cost({"headers": [(b"content-length", b"not a number")]}) == 1


def test_the_buckets_kept_are_bounded() -> None:
    clock = _Clock()
    pace = PeerPace(rate=1, burst=2, clock=clock)
    for index in range(MAX_PEERS + 50):
        pace.delay(f"ip:10.0.{index // 256}.{index % 256}", 2)  # every bucket emptied: none idle
    assert len(pace.buckets) == MAX_PEERS


def test_the_gate_makes_a_flooding_peer_wait_and_answers_busy_past_the_wait() -> None:
    async def scenario() -> list[int]:
        async def ok(scope, receive, send) -> None:  # noqa: ANN001 - ASGI
            await send({"type": "http.response.start", "status": 200, "headers": []})

        gate = RequestGate(ok, pace=PeerPace(rate=20, burst=2, max_wait_s=0.06))
        statuses: list[int] = []

        async def send(message) -> None:  # noqa: ANN001 - ASGI
            if message["type"] == "http.response.start":
                statuses.append(message["status"])

        for _ in range(5):  # two from the burst, one after 0.05 s, then waits past 0.06 s
            asyncio.create_task(gate({"type": "http", "path": "/v1/jobs", PEER: "uid:2006"}, _no_body, send))
        await gate({"type": "http", "path": "/v1/jobs"}, _no_body, send)  # in-process: not paced
        await asyncio.sleep(0.2)
        return statuses

    assert sorted(asyncio.run(scenario())) == [200, 200, 200, 200, 503, 503]


async def _no_body() -> dict:
    return {"type": "http.request", "body": b"", "more_body": False}
