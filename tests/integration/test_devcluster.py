"""Integration tests of deploy/devcluster against the real one-host Slurm cluster.

They need the cluster up (`deploy/devcluster up`, as root). Without it they skip, or fail
when METASCHED_REQUIRE_SLURM=1 (CI sets it so a broken cluster cannot pass silently).
"""

from __future__ import annotations

import json
import pwd
import re
import subprocess
import time
import uuid
from pathlib import Path

import pytest

from slurm_bridge.parse.sacctmgr import parse_user_associations, user_associations_args

REPO = Path(__file__).resolve().parents[2]
DEVCLUSTER = REPO / "deploy" / "devcluster"
EXPECTED_GRES = {
    "a100n1": "gpu:a100:8",
    "a100n2": "gpu:a100:8",
    "h100n1": "gpu:h100:8",
    "h100n2": "gpu:h100:8",
    "t4n1": "gpu:t4:4",
    "t4n2": "gpu:t4:4",
}

pytestmark = pytest.mark.slurm


def _run(argv: list[str], timeout: float = 120) -> subprocess.CompletedProcess[str]:
    """Run argv and capture text output (never through a shell)."""
    return subprocess.run(argv, capture_output=True, text=True, timeout=timeout, stdin=subprocess.DEVNULL)


@pytest.fixture(scope="module", autouse=True)
def cluster(slurm_cluster: None) -> None:
    """Gate every test in this module on a running dev cluster."""


def daemon_pids(status_out: str) -> dict[str, int]:
    """Map daemon name to pid from `deploy/devcluster status` output."""
    return {m[1]: int(m[2]) for m in re.finditer(r"^(\S+)\s+pid (\d+)", status_out, re.MULTILINE)}


def test_status_exits_zero_and_lists_every_daemon() -> None:
    status = _run([str(DEVCLUSTER), "status"])
    assert status.returncode == 0, status.stdout + status.stderr
    pids = daemon_pids(status.stdout)
    want = {"munged", "mariadbd", "slurmdbd", "slurmctld", *(f"slurmd-{n}" for n in EXPECTED_GRES)}
    assert want <= pids.keys(), status.stdout


def test_sinfo_json_has_six_nodes_with_typed_gres() -> None:
    out = _run(["sinfo", "--json"])
    assert out.returncode == 0, out.stderr
    nodes = {n["name"]: n for n in json.loads(out.stdout)["nodes"]}
    assert {name: nodes[name]["gres"] for name in nodes} == EXPECTED_GRES
    for node in nodes.values():
        assert node["cpus"] == 32 and node["real_memory"] == 256000, node["name"]
        assert "gpu" in node["partitions"], node["name"]


def _sacct_row(job_id: str) -> dict[str, str] | None:
    """Return the job's sacct allocation row once slurmdbd has it in a final state."""
    fields = ["JobID", "State", "ExitCode", "Account", "AllocTRES", "NodeList", "Comment"]
    out = _run(["sacct", "-n", "-P", "-X", "-j", job_id, "-o", ",".join(fields)]).stdout
    for line in out.splitlines():
        row = dict(zip(fields, line.split("|"), strict=False))
        if row["JobID"] == job_id and row["State"] not in ("PENDING", "RUNNING", "REQUEUED"):
            return row
    return None


@pytest.mark.parametrize(
    ("gpu_type", "count", "account"),
    [("a100", 2, "tenant-a"), ("h100", 1, "tenant-b"), ("t4", 1, "research")],
)
def test_typed_gres_job_runs_on_its_node_type_and_is_accounted(
    gpu_type: str, count: int, account: str
) -> None:
    comment = f"devcluster-test {uuid.uuid4()}"
    submit = _run(
        [
            "sbatch",
            "--parsable",
            f"--job-name=devcluster-test-{gpu_type}",
            f"--account={account}",
            f"--gres=gpu:{gpu_type}:{count}",
            "-N1",
            "-t",
            "2",
            f"--comment={comment}",
            "--chdir=/tmp",
            "--output=/dev/null",
            "--wrap",
            'test -n "$CUDA_VISIBLE_DEVICES"',
        ]
    )
    assert submit.returncode == 0, submit.stderr
    job_id = submit.stdout.strip().split(";")[0]
    try:
        deadline = time.monotonic() + 120  # other users' jobs may hold the nodes for a while
        row = None
        while row is None and time.monotonic() < deadline:
            time.sleep(0.5)
            row = _sacct_row(job_id)
        assert row is not None, f"job {job_id} not finished in sacct after 120 s"
    finally:
        _run(["scancel", job_id])
    assert row["State"] == "COMPLETED" and row["ExitCode"] == "0:0", row
    assert row["Account"] == account
    assert row["Comment"] == comment  # AccountingStoreFlags=job_comment
    assert f"gres/gpu:{gpu_type}={count}" in row["AllocTRES"].split(","), row["AllocTRES"]
    assert re.fullmatch(rf"{gpu_type}n\d+", row["NodeList"]), row["NodeList"]


def test_up_again_is_a_quick_no_op() -> None:
    before = daemon_pids(_run([str(DEVCLUSTER), "status"]).stdout)
    t0 = time.monotonic()
    up = _run([str(DEVCLUSTER), "up"], timeout=300)
    elapsed = time.monotonic() - t0
    assert up.returncode == 0, up.stdout + up.stderr
    changes = [
        line
        for line in up.stdout.splitlines()
        if re.search(r"installing|started \(pid|adding|restarting|resuming|creating", line)
    ]
    assert changes == [], up.stdout
    assert daemon_pids(_run([str(DEVCLUSTER), "status"]).stdout) == before
    assert elapsed < 20, f"no-op up took {elapsed:.1f}s"


# docs/identity.md §7: the users that exercise metasched's authorization
DEV_USERS = {
    "alice": (2001, {"tenant-a"}, "tenant-a", set(), "None"),
    "bob": (2002, {"tenant-b"}, "tenant-b", set(), "None"),
    "carol": (2003, {"tenant-a", "tenant-b"}, "tenant-a", set(), "None"),
    "dave": (2004, {"tenant-a"}, "tenant-a", {"tenant-a"}, "None"),
    "oscar": (2005, {"research"}, "research", set(), "Operator"),
}


def test_dev_users_exist_with_their_associations() -> None:
    out = _run(["sacctmgr", *user_associations_args()])
    assert out.returncode == 0, out.stderr
    users = {u.user: u for u in parse_user_associations(out.stdout)}
    for name, (uid, accounts, default, coordinates, admin) in DEV_USERS.items():
        entry = pwd.getpwnam(name)
        assert (entry.pw_uid, entry.pw_gid, entry.pw_shell) == (uid, uid, "/bin/bash"), name
        assert Path(entry.pw_dir).is_dir(), name
        user = users[name]
        assert (set(user.accounts()), user.default_account, set(user.coordinates), user.admin_level) == (
            accounts, default, coordinates, admin
        ), name


def test_a_dev_user_gets_munge_credentials_and_submits_with_plain_sbatch() -> None:
    cred = _run(["runuser", "-u", "alice", "--", "munge", "-n"])
    assert cred.returncode == 0, cred.stderr
    back = subprocess.run(["unmunge", "--numeric"], input=cred.stdout, capture_output=True, text=True, timeout=10)
    assert back.returncode == 0 and re.search(r"^UID:\s+2001$", back.stdout, re.MULTILINE), back.stdout
    base = ["runuser", "-u", "alice", "--", "sbatch", "--parsable", "--chdir=/tmp", "--output=/dev/null", "-t", "1"]
    ok = _run([*base, "-A", "tenant-a", "--wrap", "true"])
    assert ok.returncode == 0, ok.stderr
    _run(["scancel", ok.stdout.strip().split(";")[0]])
    refused = _run([*base, "-A", "tenant-b", "--wrap", "true"])
    assert refused.returncode != 0
    assert "Invalid account or account/partition combination specified" in refused.stderr
