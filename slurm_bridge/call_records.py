"""Records of Slurm command calls and their observers: latency and outcome per call, counts per command.

The runner reports every call here; metrics exporters (Prometheus, logs) implement
``CallObserver`` elsewhere so that this package does not depend on them.
"""

from __future__ import annotations

import threading
from collections import Counter
from collections.abc import Iterable
from dataclasses import dataclass
from enum import StrEnum
from typing import Protocol


class CallOutcome(StrEnum):
    """CallOutcome is how one command call ended."""

    OK = "ok"
    REJECTED = "rejected"
    TRANSIENT = "transient"
    UNKNOWN = "unknown"
    FAILED = "failed"


@dataclass(frozen=True, slots=True)
class CallRecord:
    """CallRecord is one finished command call: which command, how long, how it ended."""

    command: str
    argv: tuple[str, ...]
    latency_s: float
    outcome: CallOutcome
    returncode: int | None = None


class CallObserver(Protocol):
    """CallObserver receives one CallRecord per command call."""

    def record(self, call: CallRecord) -> None:
        """record is called once per finished call, success or failure."""


class CallCounter:
    """CallCounter counts calls per command and per (command, outcome); thread-safe."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._calls: Counter[str] = Counter()
        self._outcomes: Counter[tuple[str, CallOutcome]] = Counter()
        self._latency: Counter[str] = Counter()

    def record(self, call: CallRecord) -> None:
        """record adds one call to the counters."""
        with self._lock:
            self._calls[call.command] += 1
            self._outcomes[(call.command, call.outcome)] += 1
            self._latency[call.command] += call.latency_s

    def calls(self, command: str) -> int:
        """calls is the number of calls of ``command`` so far."""
        with self._lock:
            return self._calls[command]

    def outcomes(self, command: str, outcome: CallOutcome) -> int:
        """outcomes is the number of calls of ``command`` that ended with ``outcome``."""
        with self._lock:
            return self._outcomes[(command, outcome)]

    def total_latency_s(self, command: str) -> float:
        """total_latency_s is the summed latency of all calls of ``command``."""
        with self._lock:
            return self._latency[command]

    def snapshot(self) -> dict[str, int]:
        """snapshot is a copy of the per-command call counts."""
        with self._lock:
            return dict(self._calls)


class FanoutObserver:
    """FanoutObserver forwards each record to several observers."""

    def __init__(self, observers: Iterable[CallObserver]) -> None:
        self._observers = tuple(observers)

    def record(self, call: CallRecord) -> None:
        """record forwards ``call`` to every observer."""
        for observer in self._observers:
            observer.record(call)


class RecordingObserver:
    """RecordingObserver keeps every record in a list (for tests and debugging)."""

    def __init__(self) -> None:
        self.records: list[CallRecord] = []

    def record(self, call: CallRecord) -> None:
        """record appends ``call``."""
        self.records.append(call)
