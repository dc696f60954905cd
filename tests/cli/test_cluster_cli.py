"""``metasched cluster drain|resume|list`` (issue 26): output and ``--json``, one-line errors with their exit codes.

Local mode (the SQLite store's owner, an admin) for the commands themselves; the API on a socket
(SQLite and PostgreSQL) for who may: root yes, a member no (exit 1, nothing changed).
"""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.service.api import Service
from meta.store import audit
from meta.store.inventory import save_inventory
from tests.api_support import RunningApi, client_env


@pytest.fixture
def run(tmp_path: Path, monkeypatch: pytest.MonkeyPatch):
    """run invokes the CLI in local mode on a fresh SQLite store (its owner: an admin)."""
    monkeypatch.setenv("METASCHED_DB", f"sqlite:///{tmp_path / 'c.sqlite'}")
    monkeypatch.delenv("METASCHED_TENANT", raising=False)
    monkeypatch.delenv("METASCHED_DB_FILE", raising=False)

    def invoke(*args: str) -> Result:
        result = CliRunner().invoke(cli, list(args), prog_name="metasched")
        assert "Traceback" not in result.output, result.output
        return result

    return invoke


def _as(api: RunningApi, folder: Path, uid: int, *args: str) -> Result:
    result = CliRunner().invoke(cli, list(args), env=client_env(api.address, folder, uid), prog_name="metasched")
    assert "Traceback" not in result.output, result.output
    return result


def test_drain_list_and_resume_say_what_they_did(run) -> None:
    drained = run("cluster", "drain", "dev2", "--reason", "switch firmware")
    assert drained.exit_code == 0, drained.output
    assert drained.stdout == "cluster dev2 drained: no new placements; running work finishes\n"
    again = run("cluster", "drain", "dev2")
    assert again.exit_code == 0 and again.stdout.startswith("cluster dev2 drained (since 20")
    listed = run("cluster", "list")
    header, row = listed.stdout.splitlines()
    assert header.split() == ["CLUSTER", "SINCE", "BY", "REASON"]
    assert row.startswith("dev2") and row.endswith("switch firmware")
    assert run("cluster", "resume", "dev2").stdout == "cluster dev2 resumed: it takes new work at the next period\n"
    assert run("cluster", "resume", "dev2").stdout == "cluster dev2 was not drained: nothing changed\n"
    assert run("cluster", "list").stdout == "(none)\n"


def test_every_command_prints_json(run) -> None:
    drained = json.loads(run("cluster", "drain", "dev2", "--reason", "cabling", "--json").stdout)
    assert {k: drained[k] for k in ("cluster", "reason", "drained", "new", "known")} == {
        "cluster": "dev2", "reason": "cabling", "drained": True, "new": True, "known": None}
    listed = json.loads(run("cluster", "list", "--json").stdout)
    assert listed == [{k: drained[k] for k in ("cluster", "reason", "drained_by", "drained_at")}]
    resumed = json.loads(run("cluster", "resume", "dev2", "--json").stdout)
    assert resumed == {"cluster": "dev2", "drained": False, "was_drained": True, "ended": listed[0]}
    assert json.loads(run("cluster", "list", "--json").stdout) == []


@pytest.mark.parametrize(
    ("args", "words"),
    [
        (("drain", "dev 2"), "not a cluster name"),
        (("drain", "x" * 21), "not a cluster name"),
        (("drain", "dev/2"), "invalid cluster name"),
        (("drain", ""), "invalid cluster name"),
        (("resume", "dev 2"), "not a cluster name"),
        (("drain", "dev2", "--reason", "r" * 201), "at most 200 printable"),
        (("drain", "dev2", "--reason", "one\ntwo"), "at most 200 printable"),
    ],
)
def test_bad_input_exits_2_with_one_line_and_stores_nothing(run, args: tuple[str, ...], words: str) -> None:
    result = run("cluster", *args)
    assert result.exit_code == 2, result.output
    assert result.stdout == "" and words in result.stderr and result.stderr.count("\n") == 1
    assert result.stderr.startswith("metasched: error: ")
    assert json.loads(run("cluster", "list", "--json").stdout) == []


def test_only_an_admin_may_and_a_refusal_changes_nothing(api: RunningApi, service: Service, tmp_path: Path) -> None:
    assert _as(api, tmp_path, 0, "cluster", "drain", "emu", "--reason", "kept").exit_code == 0
    for args in (("drain", "dev2"), ("resume", "emu"), ("list",)):
        refused = _as(api, tmp_path, 1001, "cluster", *args)
        assert refused.exit_code == 1 and "only an admin" in refused.stderr and refused.stderr.count("\n") == 1
    assert [d["cluster"] for d in json.loads(_as(api, tmp_path, 0, "cluster", "list", "--json").stdout)] == ["emu"]
    with service.db.session() as session:
        actions = [line.action for line in audit.read(session)]
    assert actions.count("cluster.drain") == 1 and "cluster.resume" not in actions and "request.refused" in actions


def test_a_cluster_the_inventory_does_not_have_is_drained_with_a_note(
    api: RunningApi, service: Service, tmp_path: Path
) -> None:
    capacity = ResourceVector(cpus=64, memory=512 * 1024, gpus=8, gpu_type="a100")
    with service.db.session() as session:
        save_inventory(session, [NodeState("emu/a100n1", capacity, ("gpu",))], version=1, switch_parent={})
    typo = _as(api, tmp_path, 0, "cluster", "drain", "eum")
    assert typo.exit_code == 0 and typo.stdout.startswith("cluster eum drained")
    assert "no node of the last inventory is on cluster eum" in typo.stderr
    known = _as(api, tmp_path, 0, "cluster", "drain", "emu")
    assert known.exit_code == 0 and known.stderr == ""
