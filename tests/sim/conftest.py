"""Shared fixtures for simulator tests: tiny traces written to tmp files."""

from __future__ import annotations

from pathlib import Path

import pytest

HEADER = "job_id,submit_time,duration_s,num_gpus,gpu_type,num_cpus,memory_mib,tenant,job_kind\n"

# The hand-checked trace: 2 nodes × 4 GPUs (cluster "2x4"), exact runtime estimates.
TINY_ROWS = [
    ("A", 0, 300, 4, "x"),
    ("B", 0, 100, 4, "x"),
    ("C", 10, 100, 8, "y"),
    ("D", 20, 60, 4, "y"),
    ("E", 30, 400, 2, "z"),
]


def write_trace(path: Path, rows) -> Path:
    """write_trace writes (id, submit, duration, gpus, tenant) rows in the common schema."""
    lines = [HEADER] + [f"{j},{s},{d},{g},,,,{t},training\n" for j, s, d, g, t in rows]
    path.write_text("".join(lines))
    return path


@pytest.fixture
def tiny_trace(tmp_path: Path) -> Path:
    """tiny_trace is the 5-job hand-checked trace."""
    return write_trace(tmp_path / "tiny.csv", TINY_ROWS)
