"""What a job has produced: inference outputs (one manifest per partition) and training checkpoints."""

from __future__ import annotations

from typing import Any

from sqlalchemy import select
from sqlalchemy.orm import Session

from checkpoint import registry
from checkpoint.manifest import job_manifest
from checkpoint.policy import recommend_interval_s
from meta.store.models import Task

DEFAULT_NODE_MTBF_S = 30 * 24 * 3600.0  # a node fails about once a month


def outputs(session: Session, job_id: str) -> dict[str, Any]:
    """outputs is the job's manifest: exactly one entry per partition (None until committed)."""
    return job_manifest(session, job_id)


def checkpoints(session: Session, job_id: str, workers: int, node_mtbf_s: float) -> dict[str, Any]:
    """checkpoints lists the job's checkpoints, oldest first per task, and the Young/Daly interval."""
    tasks = list(session.scalars(select(Task.id).where(Task.job_id == job_id).order_by(Task.index)))
    views = [view for task in tasks for view in registry.history(session, task)]
    interval = recommend_interval_s([v.duration_s or 0.0 for v in views], node_mtbf_s, workers)
    return {
        "checkpoints": [checkpoint_view(v) for v in views],
        "recommended_interval_s": interval,
        "workers": workers,
    }


def checkpoint_view(view: registry.CheckpointView) -> dict[str, Any]:
    """checkpoint_view renders one checkpoint as JSON (the time in ISO 8601)."""
    return {
        "task_id": view.task_id,
        "attempt_id": view.attempt_id,
        "step": view.step,
        "path": view.path,
        "size_bytes": view.size_bytes,
        "duration_s": view.duration_s,
        "at": view.at.isoformat(),
    }
