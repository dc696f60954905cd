"""Tenant administration through the CLI: weights, quotas, validation and who may change them."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli.main import cli


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """run invokes the CLI against a fresh SQLite store."""
    monkeypatch.setenv("METASCHED_DB", f"sqlite:///{tmp_path / 't.sqlite'}")
    monkeypatch.delenv("METASCHED_TENANT", raising=False)
    runner = CliRunner()
    return lambda *args: runner.invoke(cli, list(args), catch_exceptions=False)


def test_set_then_list_shows_weights_and_quotas(run) -> None:
    assert run("tenant", "set", "research", "--weight", "3", "--guaranteed", "a100=8", "--limit", "a100=16").exit_code == 0
    result = run("tenant", "list", "--json")
    assert result.exit_code == 0
    [tenant] = json.loads(result.output)
    assert tenant == {
        "name": "research",
        "weight": 3.0,
        "guaranteed": {"a100": 8},
        "limits": {"a100": 16},
        "decayed_gpu_seconds": 0.0,
    }


def test_update_keeps_unspecified_fields(run) -> None:
    run("tenant", "set", "research", "--weight", "3", "--guaranteed", "a100=8")
    run("tenant", "set", "research", "--limit", "*=32")
    shown = json.loads(run("tenant", "show", "research").output)
    assert shown["weight"] == 3.0 and shown["guaranteed"] == {"a100": 8} and shown["limits"] == {"*": 32}


@pytest.mark.parametrize(
    "args, message",
    [
        (["--guaranteed", "a100:8"], "GPU_TYPE=COUNT"),
        (["--weight", "0"], "positive"),
        (["--guaranteed", "a100=9", "--limit", "a100=3"], "below the guarantee"),
    ],
)
def test_bad_input_exits_2_and_names_the_problem(run, args: list[str], message: str) -> None:
    result = run("tenant", "set", "research", *args)
    assert result.exit_code == 2
    assert message in result.output
    assert json.loads(run("tenant", "list", "--json").output) == []


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
    result = run("tenant", "set", name, "--weight", "2")
    assert result.exit_code == 2 and "invalid tenant name" in result.output
    assert json.loads(run("tenant", "list", "--json").output) == []


@pytest.mark.parametrize("item", ["a100=8\nx", "a100=8 9", "a100=-1"])
def test_quota_items_must_match_in_full(run, item: str) -> None:
    result = run("tenant", "set", "research", "--guaranteed", item)
    assert result.exit_code == 2 and "GPU_TYPE=COUNT" in result.output
