"""The kinds of things every part of metasched names: job shapes, topology wishes, priority bands, failures."""

from __future__ import annotations

from enum import StrEnum


class JobKind(StrEnum):
    """JobKind is the shape of work: a training gang, inference partitions or an evaluation."""

    TRAINING = "training"
    INFERENCE = "inference"
    EVALUATION = "evaluation"


class Topology(StrEnum):
    """Topology is a gang's placement constraint over the switch tree."""

    NONE = "none"
    PREFER_SAME_SWITCH = "prefer-same-switch"
    REQUIRE_SAME_SWITCH = "require-same-switch"


class FailureCategory(StrEnum):
    """FailureCategory classifies why an attempt ended badly; retry policies select on it."""

    USER_ERROR = "user_error"  # non-zero exit of the user's program
    NODE_FAILURE = "node_failure"  # node died, NODE_FAIL, lost contact
    PREEMPTED = "preempted"
    TIMEOUT = "timeout"
    OOM = "oom"
    LAUNCH_FAILURE = "launch_failure"  # Slurm rejected the submission
    LOST = "lost"  # Slurm has no record past the grace period
    CLUSTER_DARK = "cluster_dark"  # its cluster stopped answering past the grace: replayed elsewhere
    CANCELLED = "cancelled"
    INVALID_SPEC = "invalid_spec"  # the job's own data cannot be run (quarantined, never retried)
    UNKNOWN = "unknown"


class PriorityClass(StrEnum):
    """PriorityClass is the coarse band a job's tasks are ordered in before fair share."""

    DEADLINE_INFERENCE = "inference-deadline"
    TRAINING = "training"
    INFERENCE = "inference"
    EVALUATION = "evaluation"
