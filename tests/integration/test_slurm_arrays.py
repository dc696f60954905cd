"""msbatch --array as a real array on the dev cluster, side by side with plain sbatch --array (issue 13).

One real ``metasched serve`` (as in test_slurm_views.py); alice submits the same array script
with msbatch and with plain sbatch from one folder of her home. Both run 6 elements at most 2 at
once (sacct's start and end times say so), each element writes ``slurm-%A_%a.out`` in the
submit folder and sees the same SLURM_ARRAY_TASK_ID/COUNT/MIN/MAX/STEP and working folder; the
intended difference is SLURM_ARRAY_JOB_ID (and ``%A``): the metasched job id, not a Slurm id.
mscancel then cancels one waiting element, one running element and a range, and the rest.
"""

from __future__ import annotations

import re
import subprocess
from datetime import datetime
from pathlib import Path

import pytest

from tests.identity.conftest import installed_cli, shared_folder  # noqa: F401 - fixtures
from tests.identity.test_jobs_as_users import Serve, alice_dir, serve  # noqa: F401 - fixtures
from tests.integration.test_slurm_views import as_alice, sacct_state, slurm, wait_for

pytestmark = pytest.mark.slurm
SCRIPT = """#!/bin/bash
#SBATCH -A tenant-a
#SBATCH -J sweep
#SBATCH -t 5
#SBATCH --array=0-5%2
echo "array_job=$SLURM_ARRAY_JOB_ID task=$SLURM_ARRAY_TASK_ID count=$SLURM_ARRAY_TASK_COUNT \\
min=$SLURM_ARRAY_TASK_MIN max=$SLURM_ARRAY_TASK_MAX step=$SLURM_ARRAY_TASK_STEP cwd=$(pwd)"
sleep 5
"""
VARIABLES = re.compile(r"array_job=(\S*) task=(\S*) count=(\S*) min=(\S*) max=(\S*) step=(\S*) cwd=(\S*)")


def _times(slurm_ids: list[str]) -> list[tuple[datetime, datetime]]:
    """_times are the elements' (start, end) from sacct."""
    out = subprocess.run(["sacct", "-n", "-X", "-P", "-j", ",".join(slurm_ids), "-o", "Start,End"],
                         capture_output=True, text=True, timeout=60).stdout  # fmt: skip
    return [tuple(datetime.fromisoformat(t) for t in line.split("|")) for line in out.split()]  # type: ignore[misc]


def most_at_once(intervals: list[tuple[datetime, datetime]]) -> int:
    """most_at_once is the largest number of intervals running at one moment (an end and a start in one second do not overlap)."""
    return max(sum(1 for s, e in intervals if s <= start < e) for start, _ in intervals)


def _seen(folder: Path, array_id: str, indexes: range) -> dict[int, tuple[str, ...]]:
    """_seen reads each element's slurm-%A_%a.out: the variables it saw."""
    found = {}
    for index in indexes:
        text = (folder / f"slurm-{array_id}_{index}.out").read_text()
        match = VARIABLES.search(text)
        assert match, text
        found[index] = match.groups()
    return found


def _element_ids(served: Serve, job: str) -> dict[str, str]:
    """_element_ids are the Slurm ids of each element's attempts (the last one per element)."""
    return {t.name: t.attempts[-1].slurm_job_id for t in served.service.status(job).tasks if t.attempts}


def _plain_sbatch(folder: Path, script: Path) -> str:
    """_plain_sbatch submits ``script`` with Slurm's own sbatch, as alice, from ``folder``; its job id."""
    done = subprocess.run(["runuser", "-u", "alice", "--", "sbatch", "--parsable", str(script)], cwd=folder,
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    assert done.returncode == 0, done.stderr
    return done.stdout.strip().split(";")[0]


def _ended(served: Serve, job: str) -> bool:
    return served.service.status(job).state.value in ("succeeded", "failed", "cancelled")


def test_msbatch_array_runs_like_sbatch_array(serve: Serve, alice_dir: Path) -> None:  # noqa: F811
    script = alice_dir / "sweep.sh"
    script.write_text(SCRIPT)
    script.chmod(0o644)
    submitted = as_alice(serve, alice_dir, "msbatch", "--parsable", str(script))
    assert submitted.code == 0, submitted.stderr
    job = submitted.stdout.strip()
    plain = _plain_sbatch(alice_dir, script)
    try:
        wait_for("the msbatch array to end", lambda: _ended(serve, job), 240)
        wait_for("the sbatch array to end", lambda: not slurm("squeue", "-h", "-j", plain), 240)
    finally:
        subprocess.run(["scancel", plain], capture_output=True, timeout=30)
    status = serve.service.status(job)
    assert status.state.value == "succeeded", serve.why(job)
    assert sorted(t.name for t in status.tasks) == [str(i) for i in range(6)] and status.summary.kind == "training"
    ours = _element_ids(serve, job)
    assert len(ours) == 6 and all(len(t.attempts) == 1 for t in status.tasks), serve.why(job)
    plain_ids = slurm("sacct", "-n", "-X", "-P", "-j", plain, "-o", "JobID").split()
    ours_times, plain_times = _times(list(ours.values())), _times([plain])
    print(f"\nmost elements at once: msbatch {most_at_once(ours_times)}, sbatch {most_at_once(plain_times)}; "
          f"spans {max(e for _, e in ours_times) - min(s for s, _ in ours_times)} / "
          f"{max(e for _, e in plain_times) - min(s for s, _ in plain_times)}")  # fmt: skip
    assert len(plain_ids) == 6 and most_at_once(plain_times) <= 2  # what %2 means in Slurm
    assert most_at_once(ours_times) == 2  # the same throttle, and it was used
    mine, theirs = _seen(alice_dir, job, range(6)), _seen(alice_dir, plain, range(6))
    for index in range(6):
        assert mine[index][0] == job and theirs[index][0] == plain  # the intended difference: the array's id
        assert mine[index][1:] == theirs[index][1:] == (str(index), "6", "0", "5", "1", str(alice_dir))


def test_mscancel_ends_one_element_a_running_one_a_range_and_the_rest(serve: Serve, alice_dir: Path) -> None:  # noqa: F811
    out = as_alice(serve, alice_dir, "msbatch", "--parsable", "-A", "tenant-a", "-J", "held", "-t", "5",
                   "--array=0-7%2", "--wrap", "sleep 300")  # fmt: skip
    assert out.code == 0, out.stderr
    job = out.stdout.strip()

    def running() -> list[str]:
        rows = as_alice(serve, alice_dir, "msqueue", "--json", "-j", job).json()
        return [r["job_id"] for r in rows if r["st"] == "R"]  # type: ignore[index]

    wait_for("two elements to run", lambda: len(running()) == 2)
    shown = as_alice(serve, alice_dir, "msqueue", "-h", "-j", job, "-o", "%i %t").stdout.split("\n")
    assert f"{job}_[2-7%2] PD" in shown and sorted(running()) == [f"{job}_0", f"{job}_1"]

    assert as_alice(serve, alice_dir, "mscancel", f"{job}_4").code == 0  # a waiting element
    running_0 = _element_ids(serve, job)["0"]
    assert as_alice(serve, alice_dir, "mscancel", f"{job}_0").code == 0  # a running one
    wait_for("element 0's Slurm job to be cancelled", lambda: sacct_state(running_0).startswith("CANCELLED"))
    assert as_alice(serve, alice_dir, "mscancel", f"{job}_[5-6]").code == 0  # a range
    states = {t.name: t.state for t in serve.service.status(job).tasks}
    assert {states[i] for i in ("4", "5", "6")} == {"cancelled"}
    wait_for("element 0 to end cancelled", lambda: serve.service.status(job).tasks[0].state == "cancelled")
    # the throttle frees the cancelled element's slot: element 2 starts, 3 and 7 still wait
    wait_for("the next element to run", lambda: sorted(running()) == [f"{job}_1", f"{job}_2"])
    assert serve.service.status(job).state.value == "running"
    assert as_alice(serve, alice_dir, "mscancel", job).code == 0  # the whole array
    wait_for("the array to end", lambda: serve.service.status(job).state.value == "cancelled")
    assert {t.state for t in serve.service.status(job).tasks} == {"cancelled"}
