"""scontrol -o show node|job|reservation, show topology and sdiag parsing."""

import pytest

from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.scontrol import (
    parse_kv_line,
    parse_records,
    parse_show_job,
    parse_show_node,
    parse_show_reservation,
)
from slurm_bridge.parse.sdiag import parse_sdiag
from slurm_bridge.parse.topology import leaf_of_node, parse_topology, switch_parents
from slurm_bridge.states import FailureCategory


def test_kv_line_keeps_values_with_spaces():
    line = (
        "NodeName=n1 OS=Linux 6.1 #1 SMP PREEMPT_DYNAMIC @0  RealMemory=1000 "
        "Reason=Not responding [slurm@2026-12-02T11:00:00] AllocNode:Sid=host:12 CPUs/Task=2 Comment=a=b"
    )
    record = parse_kv_line(line)
    assert record["OS"] == "Linux 6.1 #1 SMP PREEMPT_DYNAMIC @0"
    assert record["Reason"] == "Not responding [slurm@2026-12-02T11:00:00]"
    assert record["AllocNode:Sid"] == "host:12" and record["CPUs/Task"] == "2"
    assert record["Comment"] == "a=b"


def test_show_node_captured(captured):
    nodes = {node.name: node for node in parse_show_node(captured("scontrol-show-node.txt").read_text())}
    assert set(nodes) == {"a100n1", "a100n2", "h100n1", "h100n2", "t4n1", "t4n2"}
    a100 = nodes["a100n1"]
    assert (a100.gres[0].type, a100.gres[0].count) == ("a100", 8)
    assert a100.cfg_tres.gpus_by_type == {"a100": 8} and a100.cfg_tres.memory_mib == 250 * 1024
    assert a100.cpus == 32 and a100.real_memory_mib == 256000
    assert a100.partitions == ("gpu", "a100")
    assert a100.raw["OS"].startswith("Linux ")
    assert all(node.condition.healthy for node in nodes.values())


def test_show_node_state_spellings():
    text = "NodeName=n1 State=DOWN*+DRAIN Reason=gpu fell off the bus [root@2026-12-02T10:00:00]\n"
    (node,) = parse_show_node(text)
    assert not node.condition.healthy and node.condition.drained
    assert node.reason == "gpu fell off the bus [root@2026-12-02T10:00:00]"


def test_show_job_captured(captured):
    jobs = {}
    for job in parse_show_job(captured("scontrol-show-job.txt").read_text()):
        jobs.setdefault(job.name, []).append(job)
    failed = jobs["exit-three"][-1]  # re-captures may keep earlier runs' finished jobs
    assert (failed.state, failed.exit_code, failed.signal) == ("FAILED", 3, None)
    assert failed.observed.category == FailureCategory.USER_ERROR
    first, second = jobs["ms-het-trainer"][-2:]
    assert first.het_job_id == second.het_job_id and (first.het_job_offset, second.het_job_offset) == (0, 1)
    gang = jobs["ms-gang-a100"][-1]
    assert gang.nodes == ("a100n1", "a100n2")
    assert gang.comment == "metasched attempt=00000000-0000-4000-8000-00000000gang token=7"
    assert gang.tres_per_node[0].count == 8
    assert jobs["in-reservation"][-1].reservation == "ms-resv-now"


def test_show_job_reference(reference):
    jobs = {job.job_id: job for job in parse_show_job(reference("scontrol-show-job.txt").read_text())}
    assert jobs[12].exit_code == 3
    assert jobs[6].signal == 15
    assert jobs[1].comment == "mjid=42"


def test_show_reservation_captured(captured):
    reservations = {
        r.name: r for r in parse_show_reservation(captured("scontrol-show-reservation.txt").read_text())
    }
    now, gang = reservations["ms-resv-now"], reservations["ms-resv-gang"]
    assert now.nodes == ("h100n2",) and "IGNORE_JOBS" in now.flags and now.state == "ACTIVE"
    assert gang.nodes == ("a100n1", "a100n2") and gang.state == "INACTIVE"
    assert gang.start is not None and gang.end is not None and gang.end > gang.start
    assert gang.users == ("root",)


@pytest.mark.parametrize("text", ["No jobs in the system", "No reservations in the system\n", ""])
def test_empty_answers(text):
    assert parse_records(text) == []


@pytest.mark.parametrize("garbage", ["hello world", "lowercase=1", "JobName=x"])
def test_show_job_garbage(garbage):
    with pytest.raises(SlurmParseError):
        parse_show_job(garbage)


def test_topology(captured, reference):
    for path in (captured("topology.txt"), reference("topology.txt")):
        switches = parse_topology(path.read_text())
        assert switches["leaf1"].nodes == ("a100n1", "a100n2", "t4n1")
        assert switches["spine"].level == 1 and switches["spine"].switches == ("leaf1", "leaf2")
        leaf = leaf_of_node(switches)
        assert leaf["t4n1"] == "leaf1" and leaf["t4n2"] == "leaf2" and leaf["h100n1"] == "leaf2"
        assert switch_parents(switches) == {"leaf1": "spine", "leaf2": "spine"}


def test_no_topology():
    assert parse_topology("topology/tree plugin not configured\n") == {}


def test_sdiag_captured(captured):
    stats = parse_sdiag(captured("sdiag.txt").read_text())
    assert stats.server_thread_count is not None and stats.server_thread_count >= 1
    assert stats.agent_queue_size == 0 and stats.dbd_agent_queue_size == 0
    assert stats.jobs_submitted and stats.jobs_submitted >= 12
    assert stats.main_mean_cycle_us is not None and stats.backfill_last_cycle_us is not None
    assert stats.rpc_counts["REQUEST_SUBMIT_BATCH_JOB"] > 0
    assert "sdiag output at Wed Dec 02 17" not in stats.raw


def test_sdiag_garbage():
    with pytest.raises(SlurmParseError):
        parse_sdiag("hello\n")
