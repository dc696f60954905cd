"""metasched doctor, managed partitions: job_submit.lua in place, and the partitions it holds those the daemon manages."""

from __future__ import annotations

from pathlib import Path

from meta.serve.doctor.check import Status
from meta.serve.doctor.conf_file import SlurmConf
from meta.serve.doctor.partitions import (
    LuaScript,
    job_submit_check,
    lua_managed,
    managed_partitions_check,
    read_lua,
)
from meta.serve.doctor.slurm_config import SlurmFacts

REPO = Path(__file__).resolve().parents[2]
LUA = LuaScript(Path("/etc/slurm/job_submit.lua"), True, frozenset({"managed"}))
SLURM_PARTITIONS = ("gpu", "t4", "managed")


def facts(plugins: str | None = "lua", running: str | None = "lua") -> SlurmFacts:
    """facts: a slurm.conf with ``JobSubmitPlugins=plugins`` and slurmctld running with ``running``."""
    values = {"jobsubmitplugins": plugins} if plugins else {}
    conf = SlurmConf(Path("/etc/slurm/slurm.conf"), values, SLURM_PARTITIONS)
    return SlurmFacts(conf.path, conf, None, {"JobSubmitPlugins": running or "(null)"}, None)


def test_the_shipped_job_submit_lua_holds_the_managed_partition() -> None:
    assert read_lua(REPO / "deploy" / "slurm").held == frozenset({"managed"})


def test_lua_tables_in_their_usual_spellings() -> None:
    assert lua_managed('local MANAGED = { a = true, ["b-2"] = true, -- c = true\n d = false }') == {"a", "b-2"}
    assert lua_managed("local MANAGED = {}") == frozenset()
    assert lua_managed("MANAGED = nil") is None


def test_a_missing_lua_file_is_not_present(tmp_path: Path) -> None:
    assert read_lua(tmp_path) == LuaScript(tmp_path / "job_submit.lua", False, None)


def test_job_submit_in_place_passes() -> None:
    assert job_submit_check(facts(), LUA, ("managed",)).status is Status.OK


def test_job_submit_lua_missing_fails_naming_its_path() -> None:
    check = job_submit_check(facts(), LuaScript(LUA.path, False, None), ("managed",))
    assert check.status is Status.FAIL and "no /etc/slurm/job_submit.lua" in check.message


def test_managed_partitions_without_the_plugin_fail() -> None:
    check = job_submit_check(facts(plugins=None, running=None), LUA, ("managed",))
    assert check.status is Status.FAIL and "no JobSubmitPlugins=lua" in check.message
    assert job_submit_check(facts(plugins=None, running=None), LUA, ()).status is Status.OK


def test_a_controller_running_without_the_plugin_asks_for_reconfigure() -> None:
    check = job_submit_check(facts(running=None), LUA, ("managed",))
    assert check.status is Status.FAIL and "scontrol reconfigure" in check.message


def test_held_but_not_managed_is_the_quickstarts_held_forever() -> None:
    check = managed_partitions_check((), LUA, True, SLURM_PARTITIONS)
    assert check.status is Status.FAIL and "held forever" in check.message and "managed" in check.message


def test_managed_but_not_held_fails() -> None:
    check = managed_partitions_check(("managed", "t4"), LUA, True, SLURM_PARTITIONS)
    assert check.status is Status.FAIL and "t4" in check.message and "start without metasched" in check.message


def test_a_managed_partition_slurm_does_not_have_fails() -> None:
    check = managed_partitions_check(("managed", "nosuch"), LUA, True, SLURM_PARTITIONS)
    assert check.status is Status.FAIL and "nosuch" in check.message


def test_matching_sets_pass_and_none_at_all_passes() -> None:
    assert managed_partitions_check(("managed",), LUA, True, SLURM_PARTITIONS).status is Status.OK
    assert managed_partitions_check((), LuaScript(LUA.path, True, frozenset()), True, SLURM_PARTITIONS).status is Status.OK
    # a script on disk that the plugin does not load holds nothing
    assert managed_partitions_check((), LUA, False, SLURM_PARTITIONS).status is Status.OK


def test_an_unreadable_table_warns() -> None:
    check = managed_partitions_check(("managed",), LuaScript(LUA.path, True, None), True, SLURM_PARTITIONS)
    assert check.status is Status.WARN and "by hand" in check.message
