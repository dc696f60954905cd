"""Preemption on the real cluster: a low-priority training gang holding the A100s is signalled
(USR1), checkpoints within the grace period, is cancelled, goes back to pending and resumes from
its checkpoint (METASCHED_RESUME_FROM) after the higher-priority job has run."""

from __future__ import annotations

from pathlib import Path

import pytest

from meta.model.states import AttemptState, JobState
from tests.harness import DaemonHarness

pytestmark = pytest.mark.slurm

# A training loop that checkpoints on USR1 (and every 10 steps), resumes from the checkpoint
# metasched hands it, and finishes at step 40. As in DDP, only rank 0 writes checkpoints.
TRAIN = r"""
rank=${SLURM_PROCID:-0}
step=0
if [ -n "${METASCHED_RESUME_FROM:-}" ]; then step=$(cat "$METASCHED_RESUME_FROM"); echo "resumed at $step"; fi
ckpt() {
  [ "$rank" = 0 ] || return 0
  f="$METASCHED_CHECKPOINT_DIR/step-$step"; echo "$step" > "$f"
  metasched checkpoint report --step "$step" --path "$f" --duration 0.1
}
trap 'ckpt; exit 0' USR1
mkdir -p "$METASCHED_CHECKPOINT_DIR"
if [ "$rank" = 0 ]; then echo "attempt $METASCHED_ATTEMPT_NUMBER starts at $step" >> "$METASCHED_CHECKPOINT_DIR/log"; fi
while [ "$step" -lt 40 ]; do
  step=$((step + 1))
  if [ $((step % 10)) -eq 0 ]; then ckpt; fi
  sleep 0.25 & wait $!
done
if [ "$rank" = 0 ]; then echo "finished at $step" >> "$METASCHED_CHECKPOINT_DIR/log"; fi
"""


def test_preempted_training_resumes_from_its_checkpoint(harness: DaemonHarness, tmp_path: Path) -> None:
    ckpt_dir = tmp_path / "ckpt"
    low = harness.submit(
        {
            "kind": "training",
            "name": "low-train",
            "tenant": "tenant-b",
            "priority_class": "evaluation",
            "workers": 2,
            "resources": {"cpus": 1, "memory": "1G", "gpus": 8, "gpu_type": "a100"},
            "checkpoint": {"dir": str(ckpt_dir), "interval": "1m", "restore_cost": "5s"},
            "preemptible": True,
            "time_limit": "10m",
            "command": TRAIN,
        }
    )
    harness.run_until(lambda: _attempt_states(harness, low) == [AttemptState.RUNNING], 60)
    harness.run_until(lambda: (ckpt_dir / "log").exists(), 30)

    high = harness.submit(
        {
            "kind": "training",
            "name": "high-train",
            "tenant": "tenant-a",
            "workers": 1,
            "resources": {"cpus": 1, "memory": "1G", "gpus": 8, "gpu_type": "a100"},
            "time_limit": "5m",
            "command": "sleep 2",
        }
    )
    harness.run_until(harness.all_finished([low, high]), 180)

    assert harness.state(high) == JobState.SUCCEEDED
    assert harness.state(low) == JobState.SUCCEEDED
    attempts = [a for t in harness.service.status(low).tasks for a in t.attempts]
    assert [a.state for a in attempts][:1] == [AttemptState.PREEMPTED]
    assert attempts[-1].state == AttemptState.SUCCEEDED
    log = (ckpt_dir / "log").read_text().splitlines()
    print("\n" + "\n".join(log))
    # the second attempt started where the first one's USR1 checkpoint left it, not at 0
    assert log[0] == "attempt 1 starts at 0"
    assert log[1].startswith(f"attempt {attempts[-1].number} starts at ")
    assert int(log[1].split()[-1]) > 0
    assert log[-1] == "finished at 40"
    assert len(log) == 3


def _attempt_states(h: DaemonHarness, job: str) -> list[AttemptState]:
    return [AttemptState(a.state) for t in h.service.status(job).tasks for a in t.attempts]
