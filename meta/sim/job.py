"""SimJob: the simulator's mutable record of one trace job across its attempts."""

from __future__ import annotations

from dataclasses import dataclass
from enum import StrEnum

from meta.policy.snapshot import PendingTask, Reservation
from meta.sim.trace import TraceJob


class JobState(StrEnum):
    """JobState is where a simulated job is in its life."""

    FUTURE = "future"
    PENDING = "pending"
    RUNNING = "running"
    STOPPING = "stopping"  # preempted, inside its grace period: still holds capacity
    DONE = "done"
    REJECTED = "rejected"


@dataclass(slots=True)
class SimJob:
    """SimJob tracks progress, checkpoints, waits and losses of one job."""

    trace: TraceJob
    submit: float  # after load compression
    measured: bool  # arrived after the warm-up
    workers: int
    gpus_per_worker: int
    estimate_s: float
    state: JobState = JobState.FUTURE
    task: PendingTask | None = None
    reservation: Reservation | None = None
    attempt: int = 0
    saved_s: float = 0.0  # work preserved by checkpoints
    attempt_start: float = 0.0
    attempt_restore_s: float = 0.0
    last_checkpoint: float | None = None
    first_start: float | None = None  # when it first ran: its first placement + SimConfig.launch_delay_s
    first_placed: float | None = None  # the decision that placed the attempt that first ran
    end_time: float | None = None
    pending_since: float = 0.0
    queue_s: float = 0.0  # total time spent pending, requeues included
    preemptions: int = 0
    discarded_gpu_s: float = 0.0  # work since the last checkpoint, thrown away by preemptions
    restore_gpu_s: float = 0.0  # time spent reloading checkpoints after restarts (no progress)
    restore_slot: int = -1  # index of the current attempt's restore in EngineResult.waste
    cluster: str = ""  # the Slurm cluster of its latest attempt ('' on a one-cluster site or before it ran)

    @property
    def lost_gpu_s(self) -> float:
        """lost_gpu_s is every GPU-second preemption cost this job: discarded work plus restores."""
        return self.discarded_gpu_s + self.restore_gpu_s

    @property
    def gpus(self) -> int:
        """gpus is the job's total GPU count (whole GPUs, all workers)."""
        return self.workers * self.gpus_per_worker

    @property
    def jct(self) -> float | None:
        """jct is the job completion time (end − submit), None until done."""
        return None if self.end_time is None else self.end_time - self.submit
