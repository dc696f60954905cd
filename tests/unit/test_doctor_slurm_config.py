"""metasched doctor, Slurm's configuration: slurm.conf read as Slurm reads it, and each check's decision."""

from __future__ import annotations

from pathlib import Path

from meta.serve.doctor.check import Status
from meta.serve.doctor.conf_file import SlurmConf, parse_lines, read_slurm_conf, slurm_conf_path
from meta.serve.doctor.slurm_config import (
    SlurmFacts,
    accounting_flags_check,
    private_data_check,
    slurm_conf_check,
    slurmctld_check,
    slurmdbd_check,
)
from slurm_bridge.parse.config import config_values

REPO = Path(__file__).resolve().parents[2]
RUNNING = config_values((REPO / "tests/fixtures/slurm/scontrol-show-config.txt").read_text())
PATH = Path("/etc/slurm/slurm.conf")


def facts(values: dict[str, str] | None = None, running: dict[str, str] | None = RUNNING,
          partitions: tuple[str, ...] = ("gpu",)) -> SlurmFacts:  # fmt: skip
    """facts are canned: a file with ``values`` (None: unreadable) and a running configuration."""
    conf = None if values is None else SlurmConf(PATH, {k.lower(): v for k, v in values.items()}, partitions)
    return SlurmFacts(PATH, conf, None if conf else "No such file or directory", running,
                      None if running is not None else "scontrol exited 1: Unable to contact slurm controller")


GOOD = {"ClusterName": "emu", "AccountingStoreFlags": "job_comment,job_script", "AccountingStorageType":
        "accounting_storage/slurmdbd", "AccountingStorageHost": "localhost", "AccountingStoragePort": "6819"}


def test_the_dev_clusters_slurm_conf_is_read_with_its_partitions_and_settings() -> None:
    conf = read_slurm_conf(REPO / "deploy/slurm/slurm.conf")
    assert conf.partitions == ("gpu", "a100", "h100", "t4", "managed")
    assert conf.get("accountingstoreflags") == "job_comment,job_script,job_env"
    assert conf.get("JobSubmitPlugins") == "lua" and conf.get("PrivateData") is None


def test_keys_are_case_insensitive_the_last_value_wins_and_includes_apply_where_they_stand(tmp_path: Path) -> None:
    (tmp_path / "extra.conf").write_text("PrivateData=jobs\nPartitionName=more Nodes=ALL\n")
    main = tmp_path / "slurm.conf"
    main.write_text("privatedata=usage # a comment\nInclude extra.conf\nAccountingStoreFlags=job_env\n"
                    "accountingstoreflags=job_comment\nNodeName=n1 CPUs=4\nPartitionName=DEFAULT State=UP\n"
                    "PartitionName=gpu Nodes=n1 Default=YES\n")  # fmt: skip
    conf = read_slurm_conf(main)
    assert conf.get("PrivateData") == "jobs" and conf.get("AccountingStoreFlags") == "job_comment"
    assert conf.partitions == ("more", "gpu") and conf.get("NodeName") is None


def test_an_include_loop_ends(tmp_path: Path) -> None:
    (tmp_path / "slurm.conf").write_text("Include slurm.conf\nClusterName=x\n")
    assert read_slurm_conf(tmp_path / "slurm.conf").get("ClusterName") == "x"


def test_parse_lines_keeps_order() -> None:
    assert parse_lines("A=1\nInclude b.conf\nPartitionName=p Nodes=ALL\n") == [
        ("set", "a", "1"), ("include", "b.conf", ""), ("partition", "p", "")]


def test_the_path_is_the_flag_else_slurm_conf_else_etc(monkeypatch) -> None:
    monkeypatch.delenv("SLURM_CONF", raising=False)
    assert slurm_conf_path(None) == PATH
    monkeypatch.setenv("SLURM_CONF", "/x/slurm.conf")
    assert slurm_conf_path(None) == Path("/x/slurm.conf") and slurm_conf_path("/y.conf") == Path("/y.conf")


def test_slurm_conf_unreadable_fails_naming_the_path() -> None:
    check = slurm_conf_check(facts(None))
    assert check.status is Status.FAIL and str(PATH) in check.message and "--slurm-conf" in check.message
    assert slurm_conf_check(facts(GOOD)).status is Status.OK


def test_slurmctld_that_does_not_answer_fails_with_its_error() -> None:
    check = slurmctld_check(facts(GOOD, running=None))
    assert check.status is Status.FAIL and "Unable to contact slurm controller" in check.message
    assert slurmctld_check(facts(GOOD)).status is Status.OK


def test_slurmctld_of_another_cluster_fails() -> None:
    check = slurmctld_check(facts({**GOOD, "ClusterName": "other"}))
    assert check.status is Status.FAIL and "cluster other" in check.message and "runs emu" in check.message


def test_job_comment_missing_from_the_file_fails_naming_the_file() -> None:
    check = accounting_flags_check(facts({**GOOD, "AccountingStoreFlags": "job_script,job_env"}))
    assert check.status is Status.FAIL and "lacks job_comment" in check.message and str(PATH) in check.message


def test_job_comment_missing_from_the_running_controller_asks_for_reconfigure() -> None:
    check = accounting_flags_check(facts(GOOD, running={**RUNNING, "AccountingStoreFlags": "job_env"}))
    assert check.status is Status.FAIL and "scontrol reconfigure" in check.message
    assert accounting_flags_check(facts(GOOD)).status is Status.OK


def test_job_comment_unset_everywhere_fails() -> None:
    check = accounting_flags_check(facts({"ClusterName": "emu"}, running={**RUNNING, "AccountingStoreFlags": "(null)"}))
    assert check.status is Status.FAIL and "(unset)" in check.message


def test_private_data_none_warns_jobs_passes_and_hiding_from_an_unprivileged_daemon_fails() -> None:
    assert private_data_check(facts(GOOD), daemon_privileged=True).status is Status.WARN
    assert private_data_check(facts({**GOOD, "PrivateData": "jobs,usage"}), daemon_privileged=True).status is Status.OK
    check = private_data_check(facts({**GOOD, "PrivateData": "jobs,usage"}), daemon_privileged=False)
    assert check.status is Status.FAIL and "jobs, usage" in check.message and "root" in check.message


def test_private_data_from_the_running_controller_when_the_file_is_unreadable() -> None:
    check = private_data_check(facts(None, running={**RUNNING, "PrivateData": "jobs"}), daemon_privileged=True)
    assert check.status is Status.OK


def test_slurmdbd_refusing_fails_naming_host_and_port() -> None:
    check = slurmdbd_check(facts({**GOOD, "AccountingStoragePort": "1"}), None,
                           "sacctmgr exited 1: Sending PersistInit msg: Connection refused")  # fmt: skip
    assert check.status is Status.FAIL and "localhost:1" in check.message and "Connection refused" in check.message


def test_slurmdbd_without_the_cluster_or_without_accounting_fails() -> None:
    check = slurmdbd_check(facts(GOOD), ["other"], None)
    assert check.status is Status.FAIL and "sacctmgr add cluster emu" in check.message
    check = slurmdbd_check(facts({**GOOD, "AccountingStorageType": "accounting_storage/none"}), ["emu"], None)
    assert check.status is Status.FAIL and "accounting_storage/none" in check.message
    assert slurmdbd_check(facts(GOOD), ["emu"], None).status is Status.OK
