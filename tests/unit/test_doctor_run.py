"""metasched doctor, one run: with nothing there, every check fails with its own reason, in order, within the deadline.

No Slurm command runs (an empty --slurm-bin-dir), no munged answers (a socket path that does not
exist), the store is a missing SQLite file and the job API a closed port: the run still returns,
each family saying what it could not reach.
"""

from __future__ import annotations

import socket
import time
from pathlib import Path

from meta.serve.doctor.check import Status, exit_code
from meta.serve.doctor.inputs import DoctorInputs
from meta.serve.doctor.run import ORDER, run_checks
from meta.serve.settings import DEFAULTS, with_overrides


def test_nothing_there_fails_each_check_in_order_within_the_deadline(tmp_path: Path) -> None:
    munge = str(tmp_path / "none" / "munge.sock")
    conf = tmp_path / "slurm.conf"
    conf.write_text(f"ClusterName=x\nAuthInfo=socket={munge}\nAccountingStorageType=accounting_storage/slurmdbd\n"
                    "AccountingStoreFlags=job_comment\nPartitionName=p Nodes=ALL\n")  # fmt: skip
    (tmp_path / "bin").mkdir()
    closed = socket.socket()
    closed.bind(("127.0.0.1", 0))
    try:
        settings = with_overrides(DEFAULTS, {"slurm_bin_dir": str(tmp_path / "bin"), "munge_socket": munge,
                                             "job_api": f"http://127.0.0.1:{closed.getsockname()[1]}"})  # fmt: skip
        started = time.monotonic()
        checks = run_checks(DoctorInputs(settings, f"sqlite:///{tmp_path / 'none.sqlite'}", conf, deadline_s=20))
        took = time.monotonic() - started
    finally:
        closed.close()
    assert took < 20
    assert [check.name for check in checks] == list(ORDER)
    status = {check.name: check.status for check in checks}
    message = {check.name: check.message for check in checks}
    for name in ("slurmctld", "slurmdbd", "munged", "store", "job-api"):
        assert status[name] is Status.FAIL, (name, message[name])
    assert "cannot run scontrol" in message["slurmctld"] and "no munged answers" in message["munged"]
    assert "even on this host" in message["job-api"] and status["clock"] is Status.WARN
    assert status["slurm-conf"] is Status.OK and status["accounting-flags"] is Status.OK
    assert exit_code(checks) == 1 and not (tmp_path / "none.sqlite").exists()
