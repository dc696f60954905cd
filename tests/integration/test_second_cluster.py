"""The second dev cluster (issue 26): Slurm's multi-cluster commands against dev2 and the first cluster.

They need both clusters up: `deploy/devcluster up --second` (as root). Without the second they
skip, or fail when METASCHED_REQUIRE_SECOND_CLUSTER=1; the first is gated as everywhere else
(METASCHED_REQUIRE_SLURM). Users submit as themselves (runuser), through the first cluster's
clients and /etc/slurm/slurm.conf: `-M` finds dev2's slurmctld through slurmdbd.
"""

from __future__ import annotations

import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from tests.integration.second_cluster import SECOND, require_second_cluster

REPO = Path(__file__).resolve().parents[2]
SECOND_NODE = re.compile(r"b-(a100|h100|t4)n\d+")
FINAL = ("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT", "NODE_FAIL", "OUT_OF_MEMORY", "PREEMPTED", "BOOT_FAIL")
SACCT_FIELDS = ("JobID", "JobName", "Cluster", "User", "State", "ExitCode", "NodeList")

pytestmark = pytest.mark.slurm


def _first_cluster() -> str:
    """The first cluster's name: ClusterName in deploy/slurm/slurm.conf."""
    m = re.search(r"^ClusterName=(\S+)", (REPO / "deploy" / "slurm" / "slurm.conf").read_text(), re.MULTILINE)
    assert m, "ClusterName missing from deploy/slurm/slurm.conf"
    return m[1]


@pytest.fixture(scope="module", autouse=True)
def second_cluster(slurm_cluster: None) -> None:
    """Gate every test here on the second cluster: skip with the reason, or fail when it is required."""
    require_second_cluster()


def _as(user: str, *argv: str) -> subprocess.CompletedProcess[str]:
    """Run a Slurm client as a real user (never through a shell)."""
    return subprocess.run(["runuser", "-u", user, "--", *argv], capture_output=True, text=True, timeout=60,
                          stdin=subprocess.DEVNULL, cwd="/tmp")  # fmt: skip


def _submit(user: str, clusters: str | None, name: str, wrap: str, *extra: str) -> tuple[str, str]:
    """sbatch as user (with -M clusters when given); return (job id, the cluster sbatch chose)."""
    where = ["-M", clusters] if clusters else []
    done = _as(user, "sbatch", *where, "--parsable", f"--job-name={name}", "--chdir=/tmp", "--output=/dev/null",
               "-t", "2", *extra, "--wrap", wrap)  # fmt: skip
    assert done.returncode == 0, done.stderr
    job_id, _, cluster = done.stdout.strip().partition(";")  # "100000;dev2" with -M, "100000" without
    return job_id, cluster or _first_cluster()


def _final_row(user: str, cluster: str, job_id: str, name: str, timeout: float = 120) -> dict[str, str]:
    """Poll `sacct -M cluster` (as user) until the job, known by id AND name, is in a final state."""
    deadline = time.monotonic() + timeout
    while True:
        out = _as(user, "sacct", "-M", cluster, "-n", "-P", "-X", "-j", job_id, "-o", ",".join(SACCT_FIELDS)).stdout
        for line in out.splitlines():
            row = dict(zip(SACCT_FIELDS, line.split("|"), strict=False))
            if row["JobID"] == job_id and row["JobName"] == name and row["State"].split()[0] in FINAL:
                return row
        assert time.monotonic() < deadline, f"job {job_id} ({name}) not final in sacct -M {cluster}: {out!r}"
        time.sleep(0.5)


def _name() -> str:
    return f"second-cluster-test-{uuid.uuid4().hex[:12]}"


def test_alice_submits_to_dev2_with_M_and_the_job_runs_on_a_dev2_node() -> None:
    name = _name()
    job_id, cluster = _submit("alice", SECOND, name, "hostname")
    assert cluster == SECOND
    row = _final_row("alice", SECOND, job_id, name)
    assert (row["Cluster"], row["User"], row["State"], row["ExitCode"]) == (SECOND, "alice", "COMPLETED", "0:0"), row
    assert SECOND_NODE.fullmatch(row["NodeList"]), row["NodeList"]
    # the first cluster's accounting has no such job: the clusters keep separate job tables
    here = _as("alice", "sacct", "-n", "-P", "-X", "-j", job_id, "--name", name, "-o", "JobID").stdout
    assert here.strip() == "", here


def _squeue_sections(text: str) -> dict[str, list[str]]:
    """Split `squeue -M all` output into cluster -> its lines (Slurm prints `CLUSTER: <name>` before each)."""
    sections: dict[str, list[str]] = {}
    current = None
    for line in text.splitlines():
        m = re.match(r"CLUSTER: (\S+)", line)
        if m:
            current = sections.setdefault(m[1], [])
        elif current is not None and line.strip():
            current.append(line)
    return sections


def test_squeue_M_all_shows_both_clusters_and_scancel_M_dev2_cancels() -> None:
    name = _name()
    job_id, _ = _submit("alice", SECOND, name, "sleep 120")
    try:
        # -h drops the `CLUSTER: <name>` lines too: sinfo -M dev2 -h is just dev2's nodes
        nodes = _as("alice", "sinfo", "-M", SECOND, "-h", "-N", "-p", "gpu", "-o", "%N").stdout.split()
        assert len(nodes) == 6 and all(SECOND_NODE.fullmatch(n) for n in nodes), nodes
        listed = _as("alice", "squeue", "-M", "all", "-o", "%i %j")
        assert listed.returncode == 0, listed.stderr
        sections = _squeue_sections(listed.stdout)
        assert {SECOND, _first_cluster()} <= sections.keys(), listed.stdout
        assert f"{job_id} {name}" in sections[SECOND], listed.stdout
        assert not any(line.split()[1:] == [name] for line in sections[_first_cluster()]), listed.stdout
    finally:
        cancel = _as("alice", "scancel", "-M", SECOND, job_id)
    assert cancel.returncode == 0, cancel.stderr
    assert _final_row("alice", SECOND, job_id, name)["State"].startswith("CANCELLED")


def test_a_job_on_the_first_cluster_still_runs_there(slurm_exclusive: None) -> None:
    name = _name()
    job_id, cluster = _submit("alice", None, name, "true")
    row = _final_row("alice", cluster, job_id, name)
    assert (row["Cluster"], row["State"], row["ExitCode"]) == (_first_cluster(), "COMPLETED", "0:0"), row
    assert re.fullmatch(r"(a100|h100|t4)n\d+", row["NodeList"]), row["NodeList"]


def test_sbatch_to_both_clusters_picks_one_and_the_job_runs_there(slurm_exclusive: None) -> None:
    # Slurm asks each cluster when the job would start and takes the earliest; on a tie it takes
    # the client's own cluster (ClusterName of its slurm.conf), here the first one.
    name = _name()
    job_id, cluster = _submit("alice", f"{SECOND},{_first_cluster()}", name, "true")
    assert cluster in (SECOND, _first_cluster())
    row = _final_row("alice", cluster, job_id, name)
    assert (row["Cluster"], row["State"]) == (cluster, "COMPLETED"), row
    node = SECOND_NODE if cluster == SECOND else re.compile(r"(a100|h100|t4)n\d+")
    assert node.fullmatch(row["NodeList"]), row
