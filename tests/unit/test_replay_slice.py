"""The replay benchmark's slice and accounting: shapes, load, account split and sacct parsing."""

from __future__ import annotations

from pathlib import Path

import pytest

from benchmarks.replay.collect import SlurmRow, _completed, _gpus, _row
from benchmarks.replay.slice import MAX_GPUS, SliceSpec, accounts_of, cut, gang, offered_load
from meta.sim.trace import TraceJob

TRACE = (
    Path(__file__).resolve().parents[3] / "shared" / "traces" / "philly" / "philly_2017-10-09_to_10-16.csv"
)


def test_gang_shapes_follow_the_dev_clusters_8_gpu_nodes() -> None:
    """gang puts up to 8 GPUs on one node and splits bigger jobs into equal shares."""
    assert gang(1) == (1, 1)
    assert gang(8) == (1, 8)
    assert gang(12) == (2, 12)
    assert gang(16) == (2, 16)


def test_accounts_split_tenants_whole_by_volume() -> None:
    """accounts_of gives the biggest tenant one account and the next ones to the lighter account."""
    rows = [TraceJob("1", 0, 100, 8, tenant="big"), TraceJob("2", 0, 100, 2, tenant="mid"),
            TraceJob("3", 0, 100, 1, tenant="small"), TraceJob("4", 0, 50, 8, tenant="big")]  # fmt: skip
    owner = accounts_of(rows)
    assert owner["mid"] == owner["small"] != owner["big"]


@pytest.mark.skipif(
    not TRACE.exists(), reason=f"the shared Philly trace is not beside this checkout ({TRACE})"
)
def test_cut_hits_the_offered_load_and_keeps_arrival_order() -> None:
    """cut returns the asked number of jobs on the asked span, at the asked load, in arrival order."""
    spec = SliceSpec(TRACE, jobs=60, span_s=120, load=1.0)
    jobs = cut(spec)
    assert len(jobs) == 60
    assert [j.arrival_s for j in jobs] == sorted(j.arrival_s for j in jobs)
    assert jobs[0].arrival_s == 0 and jobs[-1].arrival_s == pytest.approx(120)
    assert offered_load(jobs, 40, 120) == pytest.approx(1.0, abs=0.02)
    assert all(spec.min_duration_s <= j.duration_s <= spec.max_duration_s for j in jobs)
    assert all(0 < j.gpus <= MAX_GPUS and j.gpus % j.nodes == 0 for j in jobs)


def test_sacct_rows_parse_times_states_and_gpus() -> None:
    """_row reads sacct's fields; a job not started has no start; GPUs come from gres/gpu."""
    row = _row(
        "m0-0001|tenant-a|alice|2026-12-03T17:00:00|Unknown|Unknown|PENDING|billing=1,cpu=1|emu".split("|")
    )
    assert row.start is None and not row.final and row.gpus == 0
    done = _row(
        "m0-0001|tenant-a|alice|2026-12-03T17:00:00|2026-12-03T17:00:05|2026-12-03T17:01:05|COMPLETED|cpu=1,gres/gpu=8,node=1|dev2".split(
            "|"
        )
    )
    assert done.final and done.gpus == 8 and done.end - done.start == 60
    assert (row.cluster, done.cluster) == ("emu", "dev2")  # sacct -M a,b: which cluster ran it
    assert _gpus("cpu=2,gres/gpu:a100=4,gres/gpu=4") == 4


def test_a_retried_job_counts_once_by_its_completed_attempt() -> None:
    """_completed keeps each name's completed Slurm job, not its failed first attempt."""
    failed = SlurmRow("m0-0002", "tenant-b", "bob", 10.0, 11.0, 12.0, "FAILED", 1)
    completed = SlurmRow("m0-0002", "tenant-b", "bob", 20.0, 21.0, 30.0, "COMPLETED", 1)
    assert _completed([completed, failed]) == {"m0-0002": completed}
