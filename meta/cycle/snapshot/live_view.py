"""Cycle steps 7 (snapshot) and 11 (apply)'s capacity check, the live attempts: described once, again only when they change.

Loading every live attempt through the ORM and parsing its placement each period cost about
0.1 ms per running job (twice: once for what metasched holds per node, once for the policy's
reservations). The view reads a few columns per live attempt — id, version, state and its task's
newest checkpoint — and loads full rows only for attempts it has not described or whose key
moved. An attempt's version moves with every state change and recorded Slurm id, its placement
never changes, and its job and spec are written once, so an unchanged key means an unchanged
reservation. The store stays the truth; a new leader starts with an empty view.
"""

from __future__ import annotations

from collections.abc import Callable
from datetime import datetime
from typing import Any

from sqlalchemy import Row, func, select
from sqlalchemy.orm import Session

from meta.cycle.snapshot.facts import ATTEMPT_FACTS, read_jobs
from meta.model.resources import ResourceVector
from meta.model.states import LIVE_ATTEMPT_STATES, AttemptState
from meta.policy.snapshot import Reservation
from meta.store.chunks import among, chunked
from meta.store.models import Attempt, Checkpoint

_LIVE = [state.value for state in LIVE_ATTEMPT_STATES]
_HOLDING = frozenset({AttemptState.RUNNING.value, AttemptState.STOPPING.value})  # held on Slurm's nodes

Describe = Callable[[Row[Any], Row[Any], "datetime | None"], Reservation]  # (job facts, attempt facts, checkpoint)
_Key = tuple[Any, ...]


class LiveView:
    """LiveView is the leader's Reservation per live attempt, keyed by what would change it."""

    def __init__(self) -> None:
        self._described: dict[str, tuple[_Key, str, Reservation]] = {}  # id -> (key, state, reservation)
        self.rebuilt = 0  # reservations built in the last read
        self._held: dict[str, ResourceVector] | None = None  # held_per_node's sums, kept up to date once made
        self._on_node: dict[str, dict[str, list[ResourceVector]]] = {}  # node -> holding attempt -> its shares there

    def read(self, session: Session, describe: Describe) -> tuple[Reservation, ...]:
        """read returns a Reservation per live attempt, rebuilding only new or changed ones."""
        rows = session.execute(
            select(Attempt.id, Attempt.version, Attempt.state, Attempt.task_id).where(Attempt.state.in_(_LIVE))
        ).all()
        checkpoints = _newest_checkpoints(session)
        keys = {row.id: (row.version, row.state, checkpoints.get(row.task_id)) for row in rows}
        old = self._described
        stale = [a for a, key in keys.items() if a not in old or old[a][0] != key]
        fresh = self._describe(session, stale, keys, checkpoints, describe)
        self._described = {a: fresh[a] if a in fresh else old[a] for a in keys if a in fresh or a in old}
        self.rebuilt = len(fresh)
        if self._held is not None and (fresh or len(self._described) != len(old)):  # else: the same attempts
            self._update_held(old, set(fresh) | old.keys() - keys.keys())
        return tuple(entry[2] for entry in self._described.values())

    def held_per_node(self) -> dict[str, ResourceVector]:
        """held_per_node is what running and stopping attempts hold per node, as of the last read (summed once per change)."""
        if self._held is None:
            self._held = self._sum_held()
        return self._held

    def _sum_held(self) -> dict[str, ResourceVector]:
        """_sum_held adds up the shares of the running and stopping attempts, node by node."""
        self._on_node = {}
        for attempt_id, (_, state, reservation) in self._described.items():
            if state in _HOLDING:
                self._hold(attempt_id, reservation)
        return {node: _total(held) for node, held in self._on_node.items()}

    def _update_held(self, old: dict[str, tuple[_Key, str, Reservation]], changed: set[str]) -> None:
        """_update_held sums again only the nodes where ``changed`` attempts came, went or changed state.

        A steady period starts and ends a hundred of 10,000 attempts: summing every share again
        each period cost ~45 ms (issue 24). The sums equal a fresh ``_sum_held`` (tests compare them).
        """
        touched: set[str] = set()
        for attempt_id in changed:
            before = old.get(attempt_id)
            if before is not None and before[1] in _HOLDING:
                for share in before[2].shares:
                    self._on_node.get(share.node, {}).pop(attempt_id, None)
                    touched.add(share.node)
            now = self._described.get(attempt_id)
            if now is not None and now[1] in _HOLDING:
                touched.update(self._hold(attempt_id, now[2]))
        held = dict(self._held or {})  # a new dict: a caller may still hold the last one
        for node in touched:
            on_node = self._on_node.get(node)
            if on_node:
                held[node] = _total(on_node)
            else:
                held.pop(node, None)
                self._on_node.pop(node, None)
        self._held = held

    def _hold(self, attempt_id: str, reservation: Reservation) -> set[str]:
        """_hold notes the attempt's shares on their nodes; the nodes it holds."""
        for share in reservation.shares:
            self._on_node.setdefault(share.node, {}).setdefault(attempt_id, []).append(share.resources)
        return {share.node for share in reservation.shares}

    @staticmethod
    def _describe(
        session: Session,
        attempt_ids: list[str],
        keys: dict[str, _Key],
        checkpoints: dict[str, datetime],
        describe: Describe,
    ) -> dict[str, tuple[_Key, str, Reservation]]:
        """_describe reads the facts of ``attempt_ids`` and of their jobs (each job once) in chunks and describes each."""
        described: dict[str, tuple[_Key, str, Reservation]] = {}
        jobs: dict[str, Row[Any]] = {}
        for chunk in chunked(attempt_ids):
            attempts = session.execute(select(*ATTEMPT_FACTS).where(among(session, Attempt.id, chunk))).all()
            read_jobs(session, (attempt.job_id for attempt in attempts), jobs)
            for attempt in attempts:
                reservation = describe(jobs[attempt.job_id], attempt, checkpoints.get(attempt.task_id))
                described[attempt.id] = (keys[attempt.id], attempt.state, reservation)
        return described


def _total(held: dict[str, list[ResourceVector]]) -> ResourceVector:
    """_total is the sum of the shares held on one node."""
    shares = [resources for per_attempt in held.values() for resources in per_attempt]
    total = shares[0]
    for resources in shares[1:]:
        total = total + resources
    return total


def _newest_checkpoints(session: Session) -> dict[str, datetime]:
    """_newest_checkpoints is each live attempt's task's newest checkpoint time (one grouped query)."""
    live_tasks = select(Attempt.task_id).where(Attempt.state.in_(_LIVE)).scalar_subquery()
    rows = session.execute(
        select(Checkpoint.task_id, func.max(Checkpoint.at))
        .where(Checkpoint.task_id.in_(live_tasks))
        .group_by(Checkpoint.task_id)
    )
    return {task_id: at for task_id, at in rows}
