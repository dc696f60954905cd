"""The optional ``workers``/``gpus_per_worker`` columns: a recorded gang shape is replayed as asked; traces without them load as before."""

from __future__ import annotations

from pathlib import Path

import pytest

from meta.policy import fifo
from meta.sim.cluster import load_cluster
from meta.sim.config import SimConfig
from meta.sim.engine import Engine
from meta.sim.trace import TraceError, TraceJob, compress_arrivals, load_trace

EXACT = SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=0.0, idle_cycle_s=0.0)
HEADER = "job_id,submit_time,duration_s,num_gpus,tenant,workers,gpus_per_worker\n"


def _load(tmp_path: Path, text: str) -> list[TraceJob]:
    path = tmp_path / "t.csv"
    path.write_text(text)
    return load_trace(path)[0]


def test_a_trace_without_the_columns_loads_exactly_as_before(tmp_path: Path) -> None:
    (job,) = _load(tmp_path, "job_id,submit_time,duration_s,num_gpus,tenant\na,5,100,8,t\n")
    assert job == TraceJob("a", 5.0, 100.0, 8, tenant="t")
    assert (job.workers, job.gpus_per_worker) == (None, None)


def test_the_columns_give_the_shape_and_empty_cells_leave_it_to_the_simulator(tmp_path: Path) -> None:
    jobs = _load(tmp_path, HEADER + "gang,0,100,8,t,2,4\nplain,1,100,8,t,,\ncpu,2,100,0,t,3,0\n")
    assert [(j.job_id, j.workers, j.gpus_per_worker) for j in jobs] == [("gang", 2, 4), ("plain", None, None),
                                                                        ("cpu", 3, 0)]


@pytest.mark.parametrize(
    ("row", "problem"),
    [("x,0,100,8,t,2,3", "is not num_gpus 8"), ("x,0,100,8,t,2,", "both workers and gpus_per_worker"),
     ("x,0,100,8,t,1.5,4", "whole number"), ("x,0,100,0,t,0,0", "is not num_gpus"), ("x,0,100,8,t,two,4", "bad value")],
)
def test_an_inconsistent_shape_is_refused_naming_the_row(tmp_path: Path, row: str, problem: str) -> None:
    with pytest.raises(TraceError, match=problem):
        _load(tmp_path, HEADER + row + "\n")


def test_the_engine_replays_a_recorded_shape_and_splits_the_others_by_node_size(tmp_path: Path) -> None:
    jobs = _load(tmp_path, HEADER + "gang,0,100,8,t,4,2\nplain,0,100,8,t,,\n")
    result = Engine(jobs, load_cluster("4x8"), fifo.schedule, None, EXACT).run()
    shapes = {job.trace.job_id: (job.workers, job.gpus_per_worker) for job in result.jobs}
    assert shapes == {"gang": (4, 2), "plain": (1, 8)}
    assert all(job.end_time is not None for job in result.jobs)


def test_load_compression_keeps_the_shape() -> None:
    jobs = [TraceJob("a", 0, 10, 8, workers=2, gpus_per_worker=4), TraceJob("b", 100, 10, 1)]
    squeezed = compress_arrivals(jobs, 2.0)
    assert [(j.submit_time, j.workers, j.gpus_per_worker) for j in squeezed] == [(0, 2, 4), (50, None, None)]
