"""metasched doctor, the daemon's user: root with the capabilities it uses; SlurmUser and others refused."""

from __future__ import annotations

from pathlib import Path

from meta.serve.doctor.check import Status
from meta.serve.doctor.identity import Identity, daemon_user_check, privileged, read_cap_eff

ALL_CAPS = 0x000001FFFFFFFFFF
SETUID_SETGID_KILL = (1 << 5) | (1 << 6) | (1 << 7)


def test_root_with_the_capabilities_passes() -> None:
    assert daemon_user_check(Identity(0, "root", ALL_CAPS, "slurm", 64030)).status is Status.OK
    assert daemon_user_check(Identity(0, "root", SETUID_SETGID_KILL, "slurm", 64030)).status is Status.OK


def test_root_without_setuid_fails_naming_the_capability() -> None:
    check = daemon_user_check(Identity(0, "root", SETUID_SETGID_KILL & ~(1 << 7), "slurm", 64030))
    assert check.status is Status.FAIL and "CAP_SETUID" in check.message and "CapabilityBoundingSet" in check.message


def test_slurm_user_is_refused_with_slurms_own_words() -> None:
    check = daemon_user_check(Identity(64030, "slurm", 0, "slurm", 64030))
    assert check.status is Status.FAIL and "--uid only permitted by root user" in check.message
    assert privileged(Identity(64030, "slurm", 0, "slurm", 64030))


def test_another_user_is_refused() -> None:
    alice = Identity(2001, "alice", 0, "slurm", 64030)
    check = daemon_user_check(alice)
    assert check.status is Status.FAIL and "alice (uid 2001)" in check.message and "root" in check.message
    assert not privileged(alice)


def test_cap_eff_is_read_from_proc_status(tmp_path: Path) -> None:
    status = tmp_path / "status"
    status.write_text("Name:\tpython3\nCapInh:\t0000000000000000\nCapEff:\t00000000000000e0\n")
    assert read_cap_eff(status) == 0xE0
    assert read_cap_eff(tmp_path / "none") is None
