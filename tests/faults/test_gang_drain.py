"""Scenario 7: a node drained under a running 2-node training gang.

The gang (2 workers x 8 GPUs, one per node, same switch) checkpoints on USR1 like
tests/integration/test_preempt_resume.py. One of its two nodes is drained
(``scontrol update nodename=<node> state=drain``): the daemon must stop the *whole* gang (USR1,
checkpoint grace, cancel — both workers end), the first attempt ends ``preempted``, and the task
restarts from its checkpoint (step > 0) on two other nodes. Never half a gang: every Slurm job
of the task ran on exactly two nodes (sacct NodeList), and nothing of the task kept running on
the healthy node after the eviction.

Why the gang may use any 8-GPU type: the evicted task avoids the drained node from then on
(``avoid_nodes`` is a hard filter), and the only A100 nodes are a100n1/a100n2 — an A100-typed
2-node gang could never run again. So the gang asks for 8 GPUs of any type per worker; it first
lands on one leaf's pair (a100n1+a100n2 or h100n1+h100n2) and, after the eviction, resumes on the
other pair. The drained node is resumed as soon as the eviction is complete, and always in a
``finally``.
"""

# ruff: noqa: B023 - the predicates defined in loops are polled at once, inside their iteration

from __future__ import annotations

import subprocess
import time
from pathlib import Path

import pytest

from meta.model.states import AttemptState, JobState
from tests.faults.support import report, trials
from tests.harness import (
    DaemonHarness,
    attempts_of,
    duplicates,
    invariant_violations,
    sacct_records,
    slurm_jobs_of,
    squeue_names,
)

pytestmark = pytest.mark.slurm

# the training loop of test_preempt_resume.py: checkpoints on USR1 (and every 10 steps), resumes
# from METASCHED_RESUME_FROM, finishes at step 40; rank 0 writes the checkpoints and the log
TRAIN = r"""
rank=${SLURM_PROCID:-0}
step=0
if [ -n "${METASCHED_RESUME_FROM:-}" ]; then step=$(cat "$METASCHED_RESUME_FROM"); fi
ckpt() {
  [ "$rank" = 0 ] || return 0
  f="$METASCHED_CHECKPOINT_DIR/step-$step"; echo "$step" > "$f"
  metasched checkpoint report --step "$step" --path "$f" --duration 0.1
}
trap 'ckpt; exit 0' USR1
mkdir -p "$METASCHED_CHECKPOINT_DIR"
echo "attempt $METASCHED_ATTEMPT_NUMBER rank $rank on $(hostname) $SLURMD_NODENAME starts at $step" >> "$METASCHED_CHECKPOINT_DIR/log"
while [ "$step" -lt 40 ]; do
  step=$((step + 1))
  if [ $((step % 10)) -eq 0 ]; then ckpt; fi
  sleep 0.25 & wait $!
done
if [ "$rank" = 0 ]; then echo "finished at $step" >> "$METASCHED_CHECKPOINT_DIR/log"; fi
"""


def _scontrol(node: str, state: str) -> None:
    args = ["scontrol", "update", f"nodename={node}", f"state={state}"]
    if state == "drain":
        args.append("reason=fault-test")
    subprocess.run(args, check=True, capture_output=True, timeout=30)


def _node_state(node: str) -> str:
    out = subprocess.run(
        ["sinfo", "-h", "-n", node, "-p", "gpu", "-o", "%T"], capture_output=True, text=True, timeout=30
    )
    return out.stdout.strip()


def _resume(node: str) -> None:
    if _node_state(node).startswith("drain"):
        _scontrol(node, "resume")


def test_drained_node_stops_the_whole_gang_which_resumes_from_checkpoint(
    harness: DaemonHarness, tmp_path: Path
) -> None:
    rounds = trials(1, 3)
    recovery: list[float] = []
    half_gangs: list[str] = []
    started = time.monotonic()
    outcomes = []
    for trial in range(rounds):
        ckpt = tmp_path / f"ckpt-{trial}"
        job = harness.submit(
            {
                "kind": "training",
                "name": f"gang-drain-{trial}",
                "tenant": "tenant-a",
                "workers": 2,
                "resources": {"cpus": 1, "memory": "1G", "gpus": 8},
                "topology": "require-same-switch",
                "checkpoint": {"dir": str(ckpt), "interval": "1m", "restore_cost": "5s"},
                "time_limit": "10m",
                "command": TRAIN,
            }
        )
        harness.run_until(
            lambda: [a.state for a in attempts_of(harness.service, job)] == [AttemptState.RUNNING], 60
        )
        harness.run_until(
            lambda: (ckpt / "log").exists() and len((ckpt / "log").read_text().splitlines()) >= 2, 30
        )
        time.sleep(1.5)  # a few steps in
        first = attempts_of(harness.service, job)[0]
        assert len(first.nodes) == 2, first.nodes
        drained = sorted(first.nodes)[-1]
        healthy = sorted(first.nodes)[0]
        try:
            _scontrol(drained, "drain")
            t0 = time.monotonic()
            harness.run_until(
                lambda: attempts_of(harness.service, job)[0].state == AttemptState.PREEMPTED, 60
            )
            stopped_s = time.monotonic() - t0
            # the whole gang ended: nothing of the first attempt is left in Slurm, on either node
            left = [n for n in squeue_names() if n == f"ms-{first.id}"]
            _resume(drained)
            harness.run_until(
                lambda: (
                    len(attempts_of(harness.service, job)) == 2
                    and attempts_of(harness.service, job)[1].state == AttemptState.RUNNING
                ),
                90,
            )
            recovery.append(time.monotonic() - t0)
            harness.run_until(harness.all_finished([job]), 120)
        finally:
            _resume(drained)
        attempts = attempts_of(harness.service, job)
        log = (ckpt / "log").read_text().splitlines()
        ids = {a.id for a in attempts}
        per_attempt = slurm_jobs_of(ids)
        records = {r.key: r for r in sacct_records()}
        for a in attempts:
            record = records.get(f"ms-{a.id}")
            nodes = record.nodes if record else ""
            # a two-node allocation prints as "a100n[1-2]"; a single node would be a bare name
            if "[" not in nodes:
                half_gangs.append(f"attempt {a.number} ran on {nodes!r}")
        resumed = [line for line in log if line.startswith("attempt 2 ") and "starts at" in line]
        outcomes.append(
            {
                "job": harness.state(job),
                "states": [a.state for a in attempts],
                "first_nodes": sorted(first.nodes),
                "second_nodes": sorted(attempts[-1].nodes) if len(attempts) > 1 else [],
                "drained": drained,
                "healthy": healthy,
                "left_in_slurm": left,
                "resume_steps": [int(line.split()[-1]) for line in resumed],
                "first_ranks": sum(1 for line in log if line.startswith("attempt 1 ")),
                "finished": log[-1] if log else "",
                "duplicates": duplicates(per_attempt),
                "stopped_s": stopped_s,
            }
        )
        print(f"\n  trial {trial}: drained {drained}; " + "; ".join(log))
    violations = invariant_violations(harness.service)
    report(
        "gang-drain",
        trials=rounds,
        violations=len(violations),
        half_gangs=len(half_gangs),
        evicted_to_preempted_s=[o["stopped_s"] for o in outcomes],
        recovery_s=recovery,
        wall_s=time.monotonic() - started,
    )
    assert violations == []
    assert half_gangs == []
    for o in outcomes:
        assert o["job"] == JobState.SUCCEEDED, o
        assert o["states"] == [AttemptState.PREEMPTED, AttemptState.SUCCEEDED], o
        assert o["left_in_slurm"] == [], o
        assert o["first_ranks"] == 2, o  # both workers of the first gang ran
        assert o["drained"] not in o["second_nodes"], o
        assert len(o["second_nodes"]) == 2, o
        assert len(o["resume_steps"]) == 2 and all(step > 0 for step in o["resume_steps"]), o
        assert o["finished"] == "finished at 40", o
        assert o["duplicates"] == 0, o
