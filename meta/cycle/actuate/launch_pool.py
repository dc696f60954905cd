"""For step 13 (actuate): launches stream from a bounded pool of threads behind the period.

The period commits its placements (step 11) and hands the new attempts here; it does not wait
for sbatch. One dispatcher thread takes the queued work a batch at a time and runs the launch
protocol of ``actuator.py`` on it (commit ``launching``, sbatch on at most ``workers`` threads,
commit the Slurm ids), so a burst of 2,000 launches, a slow sbatch or a failing one never
stretches a period. What the pool finished is taken by the next period (``progress``).

Safety is the launch protocol's, plus one rule: an attempt this replica still has queued or in
flight (``in_flight``) is never judged by the reconciler — its sbatch may not have run yet, so
Slurm's silence says nothing. A crash forgets the queue; the store keeps the attempts
``created`` (launched by the next period) or ``launching`` without a Slurm id (looked up by
tag after the unknown window, relaunched only when confirmed absent). A lost lease stops the
pool sending (the actuator checks the batch's epoch before every sbatch), and the queue is
dropped: the new leader owns those attempts.
"""

from __future__ import annotations

import logging
import threading
from collections import deque
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass

from meta.cycle.actuate.actuator import LAUNCH_BATCH, ActuationResult, Actuator
from meta.cycle.lease import Leadership, NotLeader
from meta.model.states import AttemptState
from meta.store.chunks import chunked

log = logging.getLogger("metasched.launch_pool")


@dataclass(frozen=True)
class _Work:
    """_Work is one batch of attempts to launch under one epoch, from one state."""

    ids: tuple[str, ...]
    leadership: Leadership
    from_state: AttemptState


def _merge(into: ActuationResult, part: ActuationResult) -> None:
    """_merge adds one batch's counts to the pool's running totals."""
    for name in ("launched", "unknown", "rejected", "signalled", "cancelled"):
        getattr(into, name).extend(getattr(part, name))


class LaunchPool:
    """LaunchPool launches queued attempts on a dispatcher thread and ``workers`` sbatch threads."""

    def __init__(self, actuator: Actuator, workers: int) -> None:
        self._actuator = actuator
        self.workers = max(1, workers)
        self._lock = threading.Lock()
        self._changed = threading.Condition(self._lock)
        self._queue: deque[_Work] = deque()
        self._in_flight: set[str] = set()  # queued or being launched: never judged by the reconciler
        self._progress = ActuationResult()
        self._busy = False
        self._stop = threading.Event()  # closing: no further sbatch goes out
        self._executor: ThreadPoolExecutor | None = None
        self._thread: threading.Thread | None = None

    # --- the period's side -------------------------------------------------------------------

    def enqueue(self, ids: list[str], leadership: Leadership, from_state: AttemptState) -> int:
        """enqueue queues the attempts not already in flight; returns how many it took."""
        with self._lock:
            if self._stop.is_set():
                return 0
            fresh = [attempt_id for attempt_id in dict.fromkeys(ids) if attempt_id not in self._in_flight]
            for batch in chunked(fresh, LAUNCH_BATCH):
                self._queue.append(_Work(tuple(batch), leadership, from_state))
            self._in_flight.update(fresh)
            if fresh:
                self._start()
                self._changed.notify_all()
            return len(fresh)

    def in_flight(self) -> frozenset[str]:
        """in_flight are the attempts queued or being launched now."""
        with self._lock:
            return frozenset(self._in_flight)

    def progress(self) -> ActuationResult:
        """progress returns what the pool finished since the last call (the next period observes it)."""
        with self._lock:
            taken, self._progress = self._progress, ActuationResult()
            return taken

    def abandon(self) -> int:
        """abandon drops the queued batches (the lease was lost); batches already sending finish. Returns attempts dropped."""
        with self._lock:
            dropped = [attempt_id for work in self._queue for attempt_id in work.ids]
            self._queue.clear()
            self._in_flight.difference_update(dropped)
            self._changed.notify_all()
        if dropped:
            log.info("dropped %d queued launches: the new leader launches or looks them up", len(dropped))
        return len(dropped)

    def wait_idle(self, timeout_s: float) -> bool:
        """wait_idle waits until nothing is queued or in flight; False if ``timeout_s`` passed first."""
        with self._lock:
            return self._changed.wait_for(lambda: not self._queue and not self._busy, timeout=timeout_s)

    def close(self, timeout_s: float) -> None:
        """close stops the pool: queued work is dropped, no further sbatch goes out, the threads end.

        sbatch calls already running finish (each is bounded by the submit timeout) and their
        outcomes are recorded; attempts marked but not sent stay ``launching`` for the next leader.
        """
        self._stop.set()
        self.abandon()
        with self._lock:
            self._changed.notify_all()
            thread, executor = self._thread, self._executor
        if thread is not None:
            thread.join(timeout_s)
            if thread.is_alive():
                log.warning("launch pool still busy after %.0fs: leaving it to end with its sbatch calls", timeout_s)
        if executor is not None:
            executor.shutdown(wait=False, cancel_futures=True)

    # --- the dispatcher ----------------------------------------------------------------------

    def _start(self) -> None:
        """_start starts the dispatcher and the sbatch threads on first use (called under the lock)."""
        if self._thread is not None and self._thread.is_alive():
            return
        if self._executor is None:
            self._executor = ThreadPoolExecutor(max_workers=self.workers, thread_name_prefix="metasched-sbatch")
        self._thread = threading.Thread(target=self._run, name="metasched-launch-pool", daemon=True)
        self._thread.start()

    def _next(self) -> _Work | None:
        """_next waits for the next batch; None once the pool is closing."""
        with self._lock:
            self._busy = False
            self._changed.notify_all()
            self._changed.wait_for(lambda: self._queue or self._stop.is_set())
            if self._stop.is_set():
                return None
            self._busy = True
            return self._queue.popleft()

    def _run(self) -> None:
        """_run launches batch after batch until the pool closes."""
        while (work := self._next()) is not None:
            result = ActuationResult()
            try:
                self._actuator.launch_many(
                    list(work.ids), work.leadership, result,
                    from_state=work.from_state, stop=self._stop, executor=self._executor,
                )  # fmt: skip
            except NotLeader as exc:
                log.warning("launches stopped, epoch %d is no longer the leader's: %s", work.leadership.epoch, exc)
                self.abandon()
            except Exception:  # noqa: BLE001 - e.g. the store restarting: the next period picks these up again
                log.exception("a launch batch failed: its attempts are launched or looked up by a later period")
            finally:
                with self._lock:
                    self._in_flight.difference_update(work.ids)
                    _merge(self._progress, result)
        with self._lock:
            self._busy = False
            self._changed.notify_all()
