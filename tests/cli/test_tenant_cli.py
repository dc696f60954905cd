"""Tenant administration through the CLI: guarantees, Slurm-owned weights and limits, validation, who may change them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli
from meta.store.db import Database
from tenants.quotas import set_tenant


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """run invokes the CLI against a fresh SQLite store."""
    monkeypatch.setenv("METASCHED_DB", f"sqlite:///{tmp_path / 't.sqlite'}")
    monkeypatch.delenv("METASCHED_TENANT", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, list(args), catch_exceptions=False)


def _slurm_limits(url: str, name: str, limits: dict[str, int]) -> None:
    """_slurm_limits stores GPU limits the way the daemon's sync from Slurm's GrpTRES does."""
    database = Database(url)
    with database.session() as session:
        set_tenant(session, name, actor="sync", limits=limits)
    database.dispose()


def test_set_then_list_shows_guarantees_with_their_sources(run) -> None:
    assert run("tenant", "set", "research", "--guaranteed", "a100=8").exit_code == 0
    result = run("tenant", "list", "--json")
    assert result.exit_code == 0
    [tenant] = json.loads(result.output)
    assert {k: v for k, v in tenant.items() if k != "sources"} == {
        "name": "research",
        "weight": 1.0,
        "guaranteed": {"a100": 8},
        "limits": {},
        "decayed_gpu_seconds": 0.0,
        "submit_limits": {},
        "priority_classes": [],  # none beyond the job kinds' own (issue 21)
        "clusters": None,  # any cluster (issue 26)
        "cluster_limits": {},  # the limits above hold on every cluster (issue 26)
    }
    assert tenant["sources"]["guaranteed"] == "metasched"


def test_update_keeps_unspecified_fields(run, tmp_path: Path) -> None:
    run("tenant", "list")  # creates the store
    _slurm_limits(f"sqlite:///{tmp_path / 't.sqlite'}", "research", {"*": 32})
    run("tenant", "set", "research", "--guaranteed", "a100=8")
    run("tenant", "set", "research")
    shown = json.loads(run("tenant", "show", "research").output)
    assert shown["weight"] == 1.0 and shown["guaranteed"] == {"a100": 8} and shown["limits"] == {"*": 32}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--guaranteed", "a100:8"], "GPU_TYPE=COUNT"),
        # weights and GPU limits are Slurm's (docs/identity.md §6): refused with the command to run
        (["--weight", "3"], "sacctmgr modify account where name=research set fairshare=3"),
        (["--limit", "a100=16"], "grptres=gres/gpu:a100=16"),
    ],
)
def test_bad_input_exits_2_and_names_the_problem(run, args: list[str], message: str) -> None:
    result = run("tenant", "set", "research", *args)
    assert result.exit_code == 2
    assert message in result.output and result.output.count("\n") == 1
    assert json.loads(run("tenant", "list", "--json").output) == []


def test_a_guarantee_above_slurms_limit_is_refused(run, tmp_path: Path) -> None:
    run("tenant", "list")  # creates the store
    _slurm_limits(f"sqlite:///{tmp_path / 't.sqlite'}", "research", {"a100": 3})
    result = run("tenant", "set", "research", "--guaranteed", "a100=9")
    assert result.exit_code == 2 and "above Slurm's limit 3" in result.output
    assert json.loads(run("tenant", "show", "research").output)["guaranteed"] == {}


def test_a_tenant_member_cannot_change_tenants(run) -> None:
    result = run("--tenant", "tenant-b", "tenant", "set", "tenant-b", "--weight", "9")
    assert result.exit_code == 1 and "only an admin" in result.output


def test_a_tenant_member_sees_only_itself(run) -> None:
    run("tenant", "set", "tenant-a")
    run("tenant", "set", "tenant-b")
    names = [t["name"] for t in json.loads(run("--tenant", "tenant-b", "tenant", "list", "--json").output)]
    assert names == ["tenant-b"]
    assert run("--tenant", "tenant-b", "tenant", "show", "tenant-a").exit_code == 1


@pytest.mark.parametrize("name", ["evil\n", "evil\r\n", "\nevil", "_evil", "a/b", "x" * 129, ""])
def test_tenant_names_with_a_trailing_newline_or_junk_are_refused(run, name: str) -> None:
    result = run("tenant", "set", name, "--guaranteed", "a100=2")
    assert result.exit_code == 2 and "invalid tenant name" in result.output
    assert json.loads(run("tenant", "list", "--json").output) == []


@pytest.mark.parametrize("item", ["a100=8\nx", "a100=8 9", "a100=-1"])
def test_quota_items_must_match_in_full(run, item: str) -> None:
    result = run("tenant", "set", "research", "--guaranteed", item)
    assert result.exit_code == 2 and "GPU_TYPE=COUNT" in result.output


def test_submit_limits_are_set_shown_and_unset(run) -> None:
    result = run("tenant", "set", "research", "--max-pending", "500", "--submit-rate", "20", "--submit-burst", "100")
    assert result.exit_code == 0, result.output
    assert "submit max_pending 500, rate 20, burst 100" in result.output
    shown = json.loads(run("tenant", "show", "research").output)
    assert shown["submit_limits"] == {"max_pending": 500, "rate": 20.0, "burst": 100,
                                      "sources": {"max_pending": "metasched"}}  # fmt: skip
    assert run("tenant", "set", "research", "--max-pending", "-1").exit_code == 0
    assert json.loads(run("tenant", "show", "research").output)["submit_limits"] == {"rate": 20.0, "burst": 100}
    bad = run("tenant", "set", "research", "--submit-burst", "0")
    assert bad.exit_code == 2 and "whole number" in bad.output


def test_clusters_are_set_shown_cleared_and_checked(run) -> None:
    result = run("tenant", "set", "research", "--clusters", "emu, dev2")
    assert result.exit_code == 0, result.output
    assert result.output.rstrip().endswith(", clusters dev2,emu")
    assert json.loads(run("tenant", "show", "research").output)["clusters"] == ["dev2", "emu"]
    listed = run("tenant", "list").output.splitlines()
    assert "CLUSTERS" in listed[0] and "dev2,emu" in listed[1]
    assert run("tenant", "set", "research", "--guaranteed", "a100=1").output.rstrip().endswith(", clusters dev2,emu")
    assert json.loads(run("tenant", "show", "research").output)["clusters"] == ["dev2", "emu"]  # not given: kept
    cleared = run("tenant", "set", "research", "--clusters", "any")
    assert cleared.exit_code == 0 and cleared.output.rstrip().endswith(", clusters any")
    assert json.loads(run("tenant", "show", "research").output)["clusters"] is None
    assert "any" in run("tenant", "list").output.splitlines()[1]
    assert run("tenant", "set", "research", "--clusters", "dev2").exit_code == 0
    assert json.loads(run("tenant", "set", "research", "--clusters", "", "--json").output)["clusters"] is None


@pytest.mark.parametrize("value, message", [("dev2,a/b", "not a cluster name: 'a/b'"), ("dev2,all", "'all' is not a cluster"),
                                            (",".join(f"c{i}" for i in range(33)), "at most 32")])  # fmt: skip
def test_bad_cluster_lists_exit_2_and_change_nothing(run, value: str, message: str) -> None:
    result = run("tenant", "set", "research", "--clusters", value)
    assert result.exit_code == 2 and message in result.output and result.output.count("\n") == 1
    assert json.loads(run("tenant", "list", "--json").output) == []


def test_a_member_cannot_confine_a_tenant(run) -> None:
    result = run("--tenant", "tenant-b", "tenant", "set", "tenant-b", "--clusters", "dev2")
    assert result.exit_code == 1 and "only an admin" in result.output


REFUSED_BY_TENANT_CLUSTERS = [
    ("dev2", "sbatch: {clusters: [emu]}\n", "tenant research may run only on the clusters dev2; the job's --clusters names emu",
     ("[emu]", "[emu, dev2]")),
    ("emu", "data: {cluster: dev2, required: true}\n",
     "its data must be read on dev2 (data.required), but it may run only on the clusters emu",
     ("required: true", "required: false")),  # a preference is never refused
]  # fmt: skip


@pytest.mark.parametrize("clusters, extra, message, fix", REFUSED_BY_TENANT_CLUSTERS, ids=["m-list", "data"])
def test_a_job_outside_the_tenants_clusters_is_refused_with_exit_2(run, tmp_path: Path, clusters: str, extra: str,
                                                                    message: str, fix: tuple[str, str]) -> None:
    assert run("tenant", "set", "research", "--clusters", clusters).exit_code == 0
    job = tmp_path / "job.yaml"
    job.write_text("kind: evaluation\nname: m\ntenant: research\nresources: {gpus: 1}\ncommand: 'true'\n" + extra)
    refused = run("submit", "-f", str(job))
    assert refused.exit_code == 2, refused.output
    assert message in refused.output
    job.write_text(job.read_text().replace(*fix))
    assert run("submit", "-f", str(job)).exit_code == 0


def test_a_job_whose_required_data_is_outside_its_m_list_exits_2(run, tmp_path: Path) -> None:
    job = tmp_path / "job.yaml"
    job.write_text("kind: evaluation\nname: d\ntenant: research\nresources: {gpus: 1}\ncommand: 'true'\n"
                   "sbatch: {clusters: [emu]}\ndata: {cluster: dev2, required: true}\n")  # fmt: skip
    refused = run("submit", "-f", str(job))
    assert refused.exit_code == 2, refused.output
    assert "data.cluster dev2 is required but not in the job's --clusters (emu)" in refused.output
