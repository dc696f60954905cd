"""FaultInjectingClient: wraps a SlurmClient and injects failures before or after delegating.

"timeout after acceptance" is the important one: the real submit happens, then the caller sees
SlurmUnknownOutcome, exactly like an sbatch whose reply was lost.
"""

from __future__ import annotations

import threading
from collections.abc import Callable, Sequence
from dataclasses import dataclass
from datetime import datetime
from enum import StrEnum
from typing import Any, TypeVar

from slurm_bridge.client import SlurmClient
from slurm_bridge.errors import SlurmRejected, SlurmTransient, SlurmUnknownOutcome
from slurm_bridge.launch import RunAs
from slurm_bridge.parse.config import SlurmConfig
from slurm_bridge.parse.sacct import SacctJob
from slurm_bridge.parse.sacctmgr import AccountShares, UserAssociations
from slurm_bridge.parse.scontrol import ScontrolJob, ScontrolNode, SlurmReservation
from slurm_bridge.parse.sdiag import Sdiag
from slurm_bridge.parse.sinfo import SinfoNode
from slurm_bridge.parse.squeue import SqueueJob
from slurm_bridge.parse.topology import Switch
from slurm_bridge.reservations import ReservationSpec

T = TypeVar("T")


class FaultKind(StrEnum):
    """FaultKind is when and how an injected call fails."""

    DROP = "drop"  # transient error, the request never reaches Slurm
    REJECT = "reject"  # Slurm says no, nothing happens
    TIMEOUT_BEFORE = "timeout_before"  # unknown outcome, but nothing happened
    TIMEOUT_AFTER = "timeout_after"  # unknown outcome, and the request did take effect


@dataclass
class Fault:
    """Fault fails the next ``times`` calls of ``method`` in the given way."""

    method: str
    kind: FaultKind
    times: int = 1


class FaultInjectingClient:
    """FaultInjectingClient delegates to ``inner`` except where a queued Fault says otherwise."""

    def __init__(self, inner: SlurmClient, faults: Sequence[Fault] = ()) -> None:
        self.inner = inner
        self._faults = list(faults)
        self._lock = threading.Lock()
        self.calls: list[str] = []
        self.injected: list[tuple[str, FaultKind]] = []

    def inject(self, method: str, kind: FaultKind, times: int = 1) -> None:
        """inject queues a fault for the next ``times`` calls of ``method``."""
        with self._lock:
            self._faults.append(Fault(method, kind, times))

    def _take(self, method: str) -> FaultKind | None:
        """_take consumes one use of the first fault queued for ``method``."""
        with self._lock:
            self.calls.append(method)
            for fault in self._faults:
                if fault.method == method and fault.times > 0:
                    fault.times -= 1
                    self.injected.append((method, fault.kind))
                    return fault.kind
        return None

    def _call(self, method: str, call: Callable[[], T]) -> T:
        """_call runs ``call`` with the queued fault for ``method`` applied around it."""
        kind = self._take(method)
        message = f"injected {kind} on {method}"
        if kind == FaultKind.DROP:
            raise SlurmTransient(message, command=method)
        if kind == FaultKind.REJECT:
            raise SlurmRejected(message, command=method)
        if kind == FaultKind.TIMEOUT_BEFORE:
            raise SlurmUnknownOutcome(message, command=method)
        result = call()
        if kind == FaultKind.TIMEOUT_AFTER:
            raise SlurmUnknownOutcome(message, command=method)
        return result

    def submit(self, script: str, *, timeout_s: float | None = None, run_as: RunAs | None = None) -> int:
        """submit delegates sbatch, with faults."""
        return self._call("submit", lambda: self.inner.submit(script, timeout_s=timeout_s, run_as=run_as))

    def cancel(self, job_ids: Sequence[int | str], signal: str | None = None) -> None:
        """cancel delegates scancel, with faults."""
        return self._call("cancel", lambda: self.inner.cancel(job_ids, signal))

    def squeue(self) -> list[SqueueJob]:
        """squeue delegates, with faults."""
        return self._call("squeue", self.inner.squeue)

    def squeue_json(self) -> list[dict[str, Any]]:
        """squeue_json delegates, with faults."""
        return self._call("squeue_json", self.inner.squeue_json)

    def sinfo(self) -> list[SinfoNode]:
        """sinfo delegates, with faults."""
        return self._call("sinfo", self.inner.sinfo)

    def sacct(self, since: datetime, until: datetime | None = None) -> list[SacctJob]:
        """sacct delegates, with faults."""
        return self._call("sacct", lambda: self.inner.sacct(since, until))

    def show_nodes(self) -> list[ScontrolNode]:
        """show_nodes delegates, with faults."""
        return self._call("show_nodes", self.inner.show_nodes)

    def show_jobs(self) -> list[ScontrolJob]:
        """show_jobs delegates, with faults."""
        return self._call("show_jobs", self.inner.show_jobs)

    def topology(self) -> dict[str, Switch]:
        """topology delegates, with faults."""
        return self._call("topology", self.inner.topology)

    def qos_names(self) -> list[str]:
        """qos_names delegates, with faults."""
        return self._call("qos_names", self.inner.qos_names)

    def registered_clusters(self) -> list[str]:
        """registered_clusters delegates, with faults."""
        return self._call("registered_clusters", self.inner.registered_clusters)

    def user_associations(self, user: str | None = None) -> list[UserAssociations]:
        """user_associations delegates, with faults."""
        return self._call("user_associations", lambda: self.inner.user_associations(user))

    def account_shares(self) -> list[AccountShares]:
        """account_shares delegates, with faults."""
        return self._call("account_shares", self.inner.account_shares)

    def slurm_config(self) -> SlurmConfig:
        """slurm_config delegates, with faults."""
        return self._call("slurm_config", self.inner.slurm_config)

    def reservations(self) -> list[SlurmReservation]:
        """reservations delegates, with faults."""
        return self._call("reservations", self.inner.reservations)

    def create_reservation(self, spec: ReservationSpec) -> str:
        """create_reservation delegates, with faults."""
        return self._call("create_reservation", lambda: self.inner.create_reservation(spec))

    def update_reservation(self, spec: ReservationSpec, *, move_start: bool = True) -> None:
        """update_reservation delegates, with faults."""
        return self._call(
            "update_reservation", lambda: self.inner.update_reservation(spec, move_start=move_start)
        )

    def delete_reservation(self, name: str) -> None:
        """delete_reservation delegates, with faults."""
        return self._call("delete_reservation", lambda: self.inner.delete_reservation(name))

    def sdiag(self) -> Sdiag:
        """sdiag delegates, with faults."""
        return self._call("sdiag", self.inner.sdiag)

    def __getattr__(self, name: str) -> Any:
        """__getattr__ passes anything else (e.g. ``runner``) through to the wrapped client."""
        return getattr(self.inner, name)
