"""Submit limits from Slurm's associations (issue 16): GrpSubmitJobs per account, MaxSubmitJobs per user.

The parser on captured ``sacctmgr show assoc`` lines (the current eight-field read and the older
six-field one), and one live read on the dev cluster: limits set on the unused account ``prod``
(restored afterwards) arrive through ``CliSlurmClient.account_shares``, a user row carrying the
MaxSubmitJobs Slurm copied down from its account.
"""

from __future__ import annotations

import subprocess

import pytest

from meta.cycle.inventory.shares import to_shares
from slurm_bridge.commands import CliSlurmClient
from slurm_bridge.errors import SlurmParseError
from slurm_bridge.parse.sacctmgr import parse_account_shares

CAPTURED = """\
emu|root||1||||
emu|research||1||root|300|
emu|research|oscar|1||||20
emu|tenant-a||70|gres/gpu:a100=16|root||5
emu|tenant-a|alice|1||||5
emu|tenant-a|carol|1||||2
"""


def test_grp_and_max_submit_jobs_are_read_per_account_and_user() -> None:
    shares = {s.account: s for s in parse_account_shares(CAPTURED)}
    research, tenant_a = shares["research"], shares["tenant-a"]
    assert (research.grp_submit_jobs, research.max_submit_jobs, research.user_max_submit_jobs) == (300, None, {"oscar": 20})
    assert (tenant_a.grp_submit_jobs, tenant_a.max_submit_jobs) == (None, 5)
    assert tenant_a.user_max_submit_jobs == {"alice": 5, "carol": 2} and tenant_a.gpu_limits == {"a100": 16}
    synced = to_shares(research)
    assert (synced.max_pending, synced.max_pending_per_user, synced.user_max_pending) == (300, None, {"oscar": 20})


def test_the_older_six_field_read_still_parses_without_limits() -> None:
    [share] = parse_account_shares("emu|tenant-b||30|gres/gpu=40|root\n")
    assert share.grp_submit_jobs is None and share.user_max_submit_jobs == {}


def test_a_bad_count_is_a_parse_error() -> None:
    with pytest.raises(SlurmParseError, match="GrpSubmitJobs"):
        parse_account_shares("emu|research||1||root|lots|\n")


def _modify(*settings: str) -> None:
    subprocess.run(["sacctmgr", "-i", "modify", "account", "where", "name=prod", "set", *settings],
                   capture_output=True, text=True, timeout=60, check=True)  # fmt: skip


@pytest.mark.slurm
def test_limits_set_with_sacctmgr_arrive_with_the_shares(slurm_cluster: None) -> None:
    _modify("GrpSubmitJobs=50", "MaxSubmitJobs=7")
    try:
        shares = {s.account: s for s in CliSlurmClient().account_shares()}
    finally:
        _modify("GrpSubmitJobs=-1", "MaxSubmitJobs=-1")
    prod = shares["prod"]
    assert (prod.grp_submit_jobs, prod.max_submit_jobs) == (50, 7)
    assert prod.user_max_submit_jobs.get("root") == 7  # copied down to the user association by Slurm
    assert shares["tenant-a"].grp_submit_jobs is None  # nothing set there
