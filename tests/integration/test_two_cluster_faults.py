"""Fault scenarios on the real pair (issue 26): dev2's controller or slurmds stopped, the daemon cut off from dev2.

Each prints one ``FAULTS`` row (``tests/faults/support.report``): ``deploy/fault-suite`` runs this
file too and puts the rows in its summary; CI runs it with the integration suite.

- dev2's slurmctld stopped past the lost grace while jobs run there (its slurmds run them on): the
  jobs submitted meanwhile run on emu, the periods keep their length but for the read that finds
  dev2 dark, dev2's attempts stay unknown (not lost nor relaunched) and succeed in one attempt once
  it returns; an inference partition running there is replayed on emu past the dark grace, and
  the copy dev2 ran on is cancelled when it returns and never commits (one partition in the manifest).

- dev2's slurmds stopped (its slurmctld runs on) past the lost grace and Slurm's SlurmdTimeout
  while a training job and an inference partition run there, then started again: nothing is
  lost (every job SUCCEEDED, after a retry), nothing duplicated (one partition in the manifest,
  written by the attempt that succeeded), never two live attempts of a task at once (in
  metasched's records and in Slurm's accounting), and emu's jobs run meanwhile.
- a network cut between the daemon and dev2's controller only (an iptables DROP on the address
  the daemon's dev2 slurm.conf names; dev2 itself runs on): dev2's attempts stay running, not
  lost nor relaunched, the jobs submitted meanwhile run on emu, the periods keep their length
  but for the read that finds the cut, and after the cut is lifted each job succeeds in one attempt.
"""

from __future__ import annotations

import json
import os
import re
import shutil
import subprocess
import tempfile
import time
from collections.abc import Iterator
from datetime import datetime
from pathlib import Path

import pytest

from meta.model.clusters import cluster_of, split_qualified
from meta.model.states import AttemptState, JobState
from meta.service.api import Service
from slurm_bridge.clusters import unreachable_clusters
from tests.faults.support import report
from tests.harness import DaemonHarness
from tests.integration.second_cluster import SECOND, SECOND_CONF
from tests.integration.two_cluster_support import (
    DARK_GRACE_S,
    FIRST,
    LOST_GRACE_S,
    _attempts,
    _figures,
    _nodes,
    _p99,
    _running_in_slurm,
    _sacct_fields,
    _slurm_state,
    _spec,
    _start_dev2,
    _stop_dev2_controller,
    _stop_dev2_slurmds,
    _timed_periods,
    daemon_over_pair,
)

pytestmark = pytest.mark.slurm

FIRST_RUN_S = 239  # the first run of a task outlives the outage; its `sleep 239` is looked for afterwards
WRITE_PART = ('echo "partition $METASCHED_PARTITION attempt $METASCHED_ATTEMPT_NUMBER on $SLURM_CLUSTER_NAME" '
              '> "$METASCHED_OUTPUT_DIR/part.txt"')  # fmt: skip
RETRY = {"max_attempts": 3, "backoff": 1}
LIVE = {AttemptState.RUNNING.value, AttemptState.LAUNCHING.value, AttemptState.STOPPING.value}


@pytest.fixture
def marks() -> Iterator[Path]:
    """marks is a folder every job's user may write: a task's first run leaves its mark there."""
    folder = Path(tempfile.mkdtemp(prefix="metasched-faults-"))
    folder.chmod(0o1777)
    yield folder
    shutil.rmtree(folder, ignore_errors=True)


def _first_run_long(marks: Path, name: str, then: str) -> str:
    """_first_run_long is a command whose first run sleeps FIRST_RUN_S before ``then``; later runs do ``then`` at once."""
    return f'if mkdir "{marks}/{name}" 2>/dev/null; then sleep {FIRST_RUN_S}; fi; {then}'


def _dev2_node_states() -> dict[str, str]:
    """_dev2_node_states is each dev2 node's sinfo state (``idle*`` is not responding)."""
    out = subprocess.run(["sinfo", "-M", SECOND, "-h", "-N", "-o", "%N %T"], capture_output=True, text=True,
                         timeout=30).stdout  # fmt: skip
    pairs = [line.split() for line in out.splitlines() if not line.startswith("CLUSTER")]
    return {pair[0]: pair[1] for pair in pairs if len(pair) == 2}


def _note(seen: dict[str, float], since: float) -> None:
    """_note records when dev2's nodes were first seen not responding and first seen down."""
    states = _dev2_node_states().values()
    for what, hit in (("not responding", any(s.endswith("*") for s in states)),
                      ("down", any(s.startswith("down") for s in states))):  # fmt: skip
        if hit:
            seen.setdefault(what, time.monotonic() - since)


def _when(value: str | None) -> datetime:
    """_when reads an attempt's ISO time."""
    assert value, "an attempt without the time"
    return datetime.fromisoformat(value)


def _assert_one_live_at_a_time(h: DaemonHarness, job: str) -> None:
    """_assert_one_live_at_a_time: each attempt ended before the next one started, in metasched and in Slurm."""
    attempts = _attempts(h, job)
    assert attempts[-1].state == AttemptState.SUCCEEDED.value, (job, attempts)
    for old, new in zip(attempts, attempts[1:], strict=False):
        assert old.state not in LIVE, (job, old)
        began = new.started_at or new.created_at  # a short run may go from launching to its end unseen running
        assert _when(old.ended_at) <= _when(began), (job, old, new)
        old_end = _sacct_fields(*split_qualified(old.slurm_job_id or ""), "End")
        new_start = _sacct_fields(*split_qualified(new.slurm_job_id or ""), "Start")
        assert old_end and new_start and old_end[0] <= new_start[0], (job, old_end, new_start)


def _first_runs_alive() -> list[str]:
    """_first_runs_alive are the processes of a first run (``sleep FIRST_RUN_S``) still on this host."""
    out = subprocess.run(["pgrep", "-a", "-f", f"^sleep {FIRST_RUN_S}$"], capture_output=True, text=True, timeout=10)
    return out.stdout.splitlines()


def _one_partition(h: DaemonHarness, folder: Path, job: str) -> tuple[dict, str]:
    """_one_partition is the manifest's only partition and its part.txt (the manifest must list exactly one)."""
    written = folder / job / "_manifest.json"
    h.run_until(written.exists, timeout_s=30)  # written behind the period
    manifest = json.loads(written.read_text())
    assert manifest["complete"] and len(manifest["partitions"]) == 1, manifest
    (partition,) = manifest["partitions"]
    assert [f["path"] for f in partition["manifest"]["files"]] == ["part.txt"]
    return partition, (Path(partition["manifest"]["root"]) / "part.txt").read_text()


def test_stopped_slurmds_lose_nothing_and_duplicate_nothing(two_clusters: DaemonHarness, marks: Path,
                                                            tmp_path: Path) -> None:  # fmt: skip
    h = two_clusters
    pin = {"clusters": [SECOND]}
    train = h.submit(_spec("train", kind="training", sbatch=pin, retry=RETRY,
                           command=_first_run_long(marks, "train", "echo trained")))  # fmt: skip
    infer = h.submit(_spec("infer", kind="inference", partitions=1, output=str(tmp_path / "out"), sbatch=pin,
                           retry=RETRY, command=_first_run_long(marks, "infer", WRITE_PART)))  # fmt: skip
    on_dev2 = [train, infer]
    h.run_until(lambda: all(_running_in_slurm(h, job)() for job in on_dev2), timeout_s=60)
    before = _timed_periods(h, 4)

    stopped = time.monotonic()
    print(f"\nstopped dev2's slurmds: {', '.join(_stop_dev2_slurmds())}")
    elsewhere = [h.submit(_spec(f"emu-{i}", sbatch={"clusters": [FIRST]})) for i in range(3)]
    seen: dict[str, float] = {}

    def first_runs_ended() -> bool:
        _note(seen, stopped)
        return all(_attempts(h, job)[0].state not in LIVE for job in on_dev2)

    during = _timed_periods(h, 150, first_runs_ended)
    assert first_runs_ended(), [(job, _attempts(h, job)) for job in on_dev2]
    ended_s = time.monotonic() - stopped
    assert all(h.state(job) == JobState.SUCCEEDED for job in elsewhere), [h.state(job) for job in elsewhere]
    assert {cluster_of(node) for job in elsewhere for node in _nodes(h, job)} == {FIRST}
    firsts = {job: _attempts(h, job)[0] for job in on_dev2}
    slurm_first = {job: _sacct_fields(*split_qualified(a.slurm_job_id or ""), "State") for job, a in firsts.items()}

    restarted = time.monotonic()
    _start_dev2()
    back_s = time.monotonic() - restarted
    h.run_until(h.all_finished(on_dev2), timeout_s=120)
    done_s = time.monotonic() - restarted
    for job in on_dev2:
        assert h.state(job) == JobState.SUCCEEDED, (job, _attempts(h, job))
        _assert_one_live_at_a_time(h, job)
        assert {cluster_of(node) for node in _nodes(h, job)} == {SECOND}  # pinned: retried on dev2 only
    partition, text = _one_partition(h, tmp_path / "out", infer)
    assert text == f"partition {partition['name']} attempt {_attempts(h, infer)[-1].number} on {SECOND}\n", text
    deadline = time.monotonic() + 30
    while _first_runs_alive() and time.monotonic() < deadline:
        time.sleep(1)
    assert not _first_runs_alive(), _first_runs_alive()

    print(f"dev2 nodes first seen (s after the stop): {seen}; first runs ended after {ended_s:.0f} s "
          f"(SlurmdTimeout 60 s, lost grace {LOST_GRACE_S:g} s): " + "; ".join(
              f"{job}: {a.state} {a.failure_category} '{a.reason[:90]}', sacct {slurm_first[job]}"
              for job, a in firsts.items()))  # fmt: skip
    print(f"attempts: {[(job, [(a.number, a.state) for a in _attempts(h, job)]) for job in on_dev2]}")
    print(f"slurmds back (devcluster up --second) in {back_s:.0f} s; all done {done_s:.0f} s after the restart")
    print(f"periods before: {_figures(before)}; during the outage: {_figures(during)}")
    report("two_clusters_slurmds_stopped", trials=1, violations=0, lost=0, duplicated=0,
           healthy_period_before_s=before, healthy_period_s=during, ended_after_stop_s=[ended_s])  # fmt: skip


# --- dev2's controller stopped -----------------------------------------------------------------------


def test_a_dark_cluster_stops_nothing_elsewhere_and_loses_nothing(two_clusters: DaemonHarness) -> None:
    h = two_clusters
    on_dev2 = [h.submit(_spec(f"dev2-{i}", sbatch={"clusters": [SECOND]}, command="sleep 45")) for i in range(2)]
    h.run_until(lambda: all(_running_in_slurm(h, job)() for job in on_dev2), timeout_s=60)
    before = _timed_periods(h, 5)

    _stop_dev2_controller()  # dev2's jobs run on in its slurmds; metasched cannot see them
    elsewhere = [h.submit(_spec(f"elsewhere-{i}", command="sleep 2")) for i in range(3)]
    during = _timed_periods(h, 60, h.all_finished(elsewhere))
    assert all(h.state(job) == JobState.SUCCEEDED for job in elsewhere), [h.state(job) for job in elsewhere]
    up = {c: h.daemon.metrics.registry.get_sample_value("metasched_slurm_cluster_up", {"cluster": c}) for c in (FIRST, SECOND)}
    assert up == {FIRST: 1.0, SECOND: 0.0}  # the operator sees which cluster is dark
    assert all(cluster_of(node) == FIRST for job in elsewhere for node in _nodes(h, job))
    # past the lost grace: dev2's attempts are unknown, not lost, and nothing was launched again
    during += _timed_periods(h, LOST_GRACE_S + 3)
    for job in on_dev2:
        attempts = _attempts(h, job)
        assert [a.state for a in attempts] == [AttemptState.RUNNING.value], (job, attempts)

    _start_dev2()
    h.run_until(h.all_finished(on_dev2), timeout_s=120)
    for job in on_dev2:
        assert h.state(job) == JobState.SUCCEEDED
        assert len(_attempts(h, job)) == 1  # one run, on dev2: never a copy elsewhere
    during_sorted = sorted(during)
    print(f"\nperiods before the outage: max {max(before):.2f} s; during it ({len(during)}): median "
          f"{during_sorted[len(during) // 2]:.2f} s, max {during_sorted[-1]:.2f} s")
    report("two_clusters_slurmctld_stopped", trials=1, violations=0, lost=0, duplicated=0,
           healthy_period_before_s=before, healthy_period_s=sorted(during)[:-1])  # fmt: skip
    # only the read that finds dev2 dark waits out Slurm's connect retries (~9 s); the rest keep their length
    assert sum(length > 3.0 for length in during) <= 1, during


FIRST_T4 = ("t4n1", "t4n2")


def _first_t4s(state: str) -> None:
    """_first_t4s drains or resumes the first cluster's T4 nodes (so that a T4 job starts on dev2)."""
    for node in FIRST_T4:
        args = ["scontrol", "update", f"nodename={node}", f"state={state}"]
        subprocess.run(args + (["reason=metasched-test"] if state == "drain" else []), capture_output=True, timeout=30)


# the copy on dev2 outlives the outage; the replay elsewhere writes at once
INFER_COMMAND = ('if [ "$SLURM_CLUSTER_NAME" = dev2 ]; then sleep 120; fi; '
                 'echo "partition $METASCHED_PARTITION on $SLURM_CLUSTER_NAME" > "$METASCHED_OUTPUT_DIR/part.txt"')


def test_an_inference_partition_on_a_dark_cluster_is_replayed_once(two_clusters: DaemonHarness, tmp_path: Path) -> None:
    h = two_clusters
    spec = _spec("infer", kind="inference", partitions=1, output=str(tmp_path / "out"), command=INFER_COMMAND,
                 resources={"cpus": 1, "memory": "1G", "gpus": 1, "gpu_type": "t4"})  # fmt: skip
    _first_t4s("drain")
    try:
        job = h.submit(spec)
        # the job counts as running once placed; the outage must come after dev2 has the Slurm job
        h.run_until(_running_in_slurm(h, job), timeout_s=60)
    finally:
        _first_t4s("resume")
    (first,) = _attempts(h, job)
    assert {cluster_of(node) for node in first.nodes} == {SECOND}, first.nodes

    _stop_dev2_controller()
    started = time.monotonic()
    h.run_until(lambda: h.state(job) == JobState.SUCCEEDED, timeout_s=120)
    replayed_after = time.monotonic() - started
    attempts = _attempts(h, job)
    assert [a.state for a in attempts] == [AttemptState.LOST.value, AttemptState.SUCCEEDED.value], attempts
    assert {cluster_of(node) for node in attempts[1].nodes} == {FIRST}
    assert replayed_after >= DARK_GRACE_S  # never before the grace

    _start_dev2()  # the copy that ran on is an orphan now: cancelled, and it never commits
    copy_cluster, copy_id = split_qualified(attempts[0].slurm_job_id or "")
    assert copy_cluster == SECOND and copy_id.isdigit(), attempts[0].slurm_job_id
    h.run_until(lambda: _slurm_state(copy_cluster, copy_id).startswith("CANCELLED"), timeout_s=90)
    written = tmp_path / "out" / job / "_manifest.json"
    h.run_until(written.exists, timeout_s=30)
    manifest = json.loads(written.read_text())
    assert manifest["complete"] and len(manifest["partitions"]) == 1
    (partition,) = manifest["partitions"]
    assert [f["path"] for f in partition["manifest"]["files"]] == ["part.txt"]
    assert (Path(partition["manifest"]["root"]) / "part.txt").read_text() == f"partition {partition['name']} on {FIRST}\n"
    print(f"\nthe partition was replayed on {FIRST} {replayed_after:.1f} s after dev2 went dark (grace {DARK_GRACE_S:g} s)")
    report("two_clusters_inference_replay", trials=1, violations=0, lost=0, duplicated=0, replayed_after_s=[replayed_after])


# --- the network cut ------------------------------------------------------------------------------------

CUT_ADDRESS = "127.0.0.2"  # the daemon's dev2 slurm.conf names dev2's controller by this address only
CUT_DARK_GRACE_S = 150.0  # longer than the cut: no replay is due
HOLD_CUT_S = 20.0  # how long dev2 stays cut off after the daemon found it out


def _controller_port() -> str:
    """_controller_port is dev2's SlurmctldPort."""
    match = re.search(r"^SlurmctldPort=(\d+)", Path(SECOND_CONF).read_text(), re.MULTILINE)
    assert match, f"no SlurmctldPort in {SECOND_CONF}"
    return match.group(1)


def _rule() -> list[str]:
    """_rule is the iptables rule that drops the daemon's packets to dev2's controller (and no one else's)."""
    return ["OUTPUT", "-d", CUT_ADDRESS, "-p", "tcp", "--dport", _controller_port(), "-j", "DROP",
            "-m", "comment", "--comment", "metasched-test-cut"]  # fmt: skip


def _cut(on: bool) -> None:
    """_cut drops (on) or lets through (off) the daemon's packets to dev2's controller; idempotent."""
    present = lambda: subprocess.run(["iptables", "-C", *_rule()], capture_output=True, timeout=30).returncode == 0  # noqa: E731
    if on and not present():
        subprocess.run(["iptables", "-I", *_rule()], check=True, capture_output=True, timeout=30)
    while not on and present():
        subprocess.run(["iptables", "-D", *_rule()], check=True, capture_output=True, timeout=30)


def _conf_via(address: str, folder: Path) -> Path:
    """_conf_via copies dev2's config folder to ``folder`` with its controller reached at ``address``."""
    shutil.copytree(Path(SECOND_CONF).parent, folder)
    folder.chmod(0o755)
    conf = folder / "slurm.conf"
    text = re.sub(r"^SlurmctldHost=(\w[\w.-]*).*$", rf"SlurmctldHost=\1({address})", conf.read_text(), flags=re.M)
    assert f"({address})" in text, "no SlurmctldHost in dev2's slurm.conf"
    conf.write_text(text)
    return conf


@pytest.fixture
def cut_pair(slurm_exclusive: None, pg_service: Service, tmp_path: Path) -> Iterator[DaemonHarness]:
    """cut_pair is the daemon over emu and dev2, dev2 reached at CUT_ADDRESS (which ``_cut`` can drop)."""
    if shutil.which("iptables") is None:
        # deploy/run-tests installs it: where the second cluster is required, a missing tool fails
        if os.environ.get("METASCHED_REQUIRE_SECOND_CLUSTER") == "1":
            pytest.fail("the network cut needs iptables (apt-get install iptables; deploy/run-tests does)")
        pytest.skip("the network cut needs iptables (apt-get install iptables; deploy/run-tests does)")
    folder = Path(tempfile.mkdtemp(prefix="metasched-cut-"))
    try:
        with daemon_over_pair(pg_service, tmp_path, str(_conf_via(CUT_ADDRESS, folder / "slurm-dev2")),
                              dark_grace_s=CUT_DARK_GRACE_S) as harness:  # fmt: skip
            try:
                yield harness
            finally:
                _cut(False)
    finally:
        _cut(False)
        shutil.rmtree(folder, ignore_errors=True)


def test_a_cut_off_cluster_keeps_its_work_and_the_other_goes_on(cut_pair: DaemonHarness, tmp_path: Path) -> None:
    h = cut_pair
    pin = {"clusters": [SECOND]}
    on_dev2 = [h.submit(_spec("eval", sbatch=pin, command="sleep 60")),
               h.submit(_spec("infer", kind="inference", partitions=1, output=str(tmp_path / "out"), sbatch=pin,
                              command=f"sleep 60; {WRITE_PART}"))]  # fmt: skip
    h.run_until(lambda: all(_running_in_slurm(h, job)() for job in on_dev2), timeout_s=60)
    before = _timed_periods(h, 8)

    _cut(True)
    cut_at = time.monotonic()
    elsewhere = [h.submit(_spec(f"during-cut-{i}")) for i in range(3)]
    held = lambda: unreachable_clusters(h.client).get(SECOND, 0.0) >= HOLD_CUT_S  # noqa: E731
    during = _timed_periods(h, 90, lambda: h.all_finished(elsewhere)() and held())
    found_s = time.monotonic() - cut_at - unreachable_clusters(h.client).get(SECOND, 0.0)
    assert held(), unreachable_clusters(h.client)
    assert h.daemon.metrics.registry.get_sample_value("metasched_slurm_cluster_up", {"cluster": SECOND}) == 0.0
    assert all(h.state(job) == JobState.SUCCEEDED for job in elsewhere), [h.state(job) for job in elsewhere]
    assert {cluster_of(node) for job in elsewhere for node in _nodes(h, job)} == {FIRST}
    for job in on_dev2:  # not judged, not lost, not relaunched; and dev2 runs them on
        attempts = _attempts(h, job)
        assert [a.state for a in attempts] == [AttemptState.RUNNING.value], (job, attempts)
        assert _sacct_fields(*split_qualified(attempts[0].slurm_job_id or ""), "State") == ["RUNNING"]

    _cut(False)
    restored = time.monotonic()
    after = _timed_periods(h, 60, lambda: SECOND not in unreachable_clusters(h.client))
    answered_s = time.monotonic() - restored
    assert SECOND not in unreachable_clusters(h.client), "dev2 still dark 60 s after the cut was lifted"
    h.run_until(h.all_finished(on_dev2), timeout_s=90)
    for job in on_dev2:
        attempts = _attempts(h, job)
        assert [a.state for a in attempts] == [AttemptState.SUCCEEDED.value], (job, attempts)
        assert split_qualified(attempts[0].slurm_job_id or "")[0] == SECOND
    partition, text = _one_partition(h, tmp_path / "out", on_dev2[1])
    assert text == f"partition {partition['name']} attempt 1 on {SECOND}\n", text

    rest = sorted(during)[:-1]  # all but the read that found the cut (it waits out Slurm's connect retries)
    print(f"\nthe cut was found {found_s:.1f} s after it began (the longest period {max(during):.1f} s); "
          f"dev2 answered again {answered_s:.1f} s after it was lifted ({len(after)} periods)")
    print(f"periods before: {_figures(before)}; during the cut: {_figures(during)}; "
          f"without the one that found it: p99 {_p99(rest):.2f} s")
    report("two_clusters_network_cut", trials=1, violations=0, lost=0, duplicated=0, healthy_period_before_s=before,
           healthy_period_s=rest, cut_s=round(found_s, 1), recover_after_heal_s=round(answered_s, 1))  # fmt: skip
    assert _p99(rest) <= _p99(before) + 0.5, (before, during)
