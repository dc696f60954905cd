"""``metasched serve --config FILE``: the daemon's settings file, its example, its checks and the flags over it."""

from __future__ import annotations

import dataclasses
import re
import tomllib
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli import serve_cmd
from cli.main import cli
from meta.cycle.apply.decision_log import DecisionLogSettings
from meta.cycle.daemon import DaemonConfig
from meta.serve.run import RunMode, ServeError, check_settings, decision_log
from meta.serve.settings import DEFAULTS, NAMES, ServeSettings
from meta.serve.settings_file import SettingsFileError, load_settings, settings_from

EXAMPLE = Path(__file__).resolve().parents[2] / "deploy" / "metasched.toml.example"
_COMMENTED = re.compile(r"^#\s*([a-z_]+)\s*=")


def test_the_example_lists_every_setting_once_with_its_default_and_a_comment() -> None:
    lines = EXAMPLE.read_text(encoding="utf-8").splitlines()
    values = tomllib.loads("\n".join(lines))
    commented = [m.group(1) for line in lines if (m := _COMMENTED.match(line))]
    assert sorted([*values, *commented]) == sorted(NAMES), "deploy/metasched.toml.example drifted from ServeSettings"
    assert load_settings(EXAMPLE) == DEFAULTS  # what it sets is each default, in the right type
    assert all(getattr(DEFAULTS, name) is None for name in commented)  # only settings with no value are left out
    for number, line in enumerate(lines):
        if re.match(r"^#?\s*[a-z_]+\s*=", line):
            assert lines[number - 1].startswith("# "), f"line {number + 1}: no comment above {line!r}"


def test_the_defaults_are_the_daemons_own() -> None:
    daemon = DaemonConfig()
    assert (DEFAULTS.period, DEFAULTS.leader_lease, DEFAULTS.submit_timeout, DEFAULTS.submit_parallel) == (
        daemon.period_s, daemon.leader_lease_s, daemon.submit_timeout_s, daemon.submit_parallel)
    assert (DEFAULTS.grace, DEFAULTS.unknown_window, DEFAULTS.lost_grace) == (
        daemon.launch.grace_s, daemon.reconcile.unknown_window_s, daemon.reconcile.lost_grace_s)
    assert decision_log(DEFAULTS) == DecisionLogSettings()


@pytest.mark.parametrize(
    ("text", "want"),
    [
        ("perod = 3\n", "unknown setting 'perod' (did you mean 'period'?)"),
        ('period = "fast"\n', "period: want a number, got string 'fast'"),
        ("submit_parallel = 2.5\n", "submit_parallel: want a whole number, got float 2.5"),
        ("submit_parallel = 65\n", "submit_parallel: must be between 1 and 64, got 65"),
        ("period = 0.01\n", "period: must be at least 0.1, got 0.01"),
        ("metrics_port = true\n", "metrics_port: want a whole number, got boolean True"),
        ('managed_partitions = "a,b"\n', "managed_partitions: want a list of strings"),
        ('log_level = "LOUD"\n', "log_level: must be one of DEBUG, INFO, WARNING, ERROR, got 'LOUD'"),
        ('decision_retention = "soon"\n', "decision_retention: "),
        ("period = 3\n[daemon]\nperiod = 4\n", "unknown setting 'daemon'"),
        ("period = \n", "not valid TOML"),
        ('site_name = ""\n', "site_name: want 1 to 64 printable characters"),
        ('site_name = "prod\\nstaging"\n', "site_name: want 1 to 64 printable characters"),
        (f'site_name = "{"x" * 65}"\n', "site_name: want 1 to 64 printable characters"),
    ],
)
def test_a_bad_file_is_refused_in_one_line(tmp_path: Path, text: str, want: str) -> None:
    path = tmp_path / "metasched.toml"
    path.write_text(text)
    with pytest.raises(SettingsFileError) as info:
        load_settings(path)
    message = str(info.value)
    assert message.startswith(f"{path}: ") and want in message and "\n" not in message


def test_a_file_reads_over_the_defaults() -> None:
    settings = settings_from({"period": 5, "managed_partitions": ["managed", " "], "holder": "head-1"})
    assert settings == dataclasses.replace(DEFAULTS, period=5.0, managed_partitions=("managed",), holder="head-1")
    assert isinstance(settings.period, float)


def _capture(monkeypatch: pytest.MonkeyPatch) -> list[tuple[ServeSettings, RunMode]]:
    """_capture replaces the daemon's run by a recorder: the command's parsing alone is under test."""
    seen: list[tuple[ServeSettings, RunMode]] = []

    def run(settings: ServeSettings, _open: Any, mode: RunMode) -> dict[str, Any]:
        seen.append((settings, mode))
        return {"ran": True}

    monkeypatch.setattr(serve_cmd, "run_daemon", run)
    return seen


def _serve(*argv: str, env: dict[str, str | None] | None = None) -> Result:
    base: dict[str, str | None] = {"METASCHED_CONFIG": None, "METASCHED_SUBMIT_PARALLEL": None,
                                   "METASCHED_MANAGED_PARTITIONS": None, "METASCHED_STATE_DIR": None,
                                   "METASCHED_SITE_NAME": None}  # fmt: skip
    return CliRunner().invoke(cli, ["serve", *argv], env=base | (env or {}), prog_name="metasched")


def test_flags_override_the_file_and_defaults_never_do(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture(monkeypatch)
    config = tmp_path / "metasched.toml"
    config.write_text('period = 5.0\nsubmit_parallel = 8\nmanaged_partitions = ["managed"]\napi_listen = "off"\n')
    result = _serve("--config", str(config), "--once", "--period", "3", "--managed-partitions", "a, b")
    assert result.exit_code == 0, result.output
    settings, mode = seen[0]
    assert (settings.period, settings.submit_parallel, settings.managed_partitions) == (3.0, 8, ("a", "b"))
    assert settings.api_listen == "off" and settings.lost_grace == DEFAULTS.lost_grace and mode.once
    assert '"ran": true' in result.output


def test_the_config_comes_from_its_environment_variable_and_env_flags_override_it(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    seen = _capture(monkeypatch)
    config = tmp_path / "metasched.toml"
    config.write_text("submit_parallel = 8\ngrace = 30\n")
    result = _serve("--once", env={"METASCHED_CONFIG": str(config), "METASCHED_SUBMIT_PARALLEL": "2"})
    assert result.exit_code == 0, result.output
    assert (seen[0][0].submit_parallel, seen[0][0].grace) == (2, 30)


def test_no_file_means_the_defaults(monkeypatch: pytest.MonkeyPatch) -> None:
    seen = _capture(monkeypatch)
    assert _serve("--once").exit_code == 0
    assert seen[0][0] == DEFAULTS


def test_a_bad_file_refuses_the_start_in_one_line_before_the_store(tmp_path: Path) -> None:
    config = tmp_path / "metasched.toml"
    config.write_text("submit_paralel = 8\n")
    result = _serve("--config", str(config), "--once", env={"METASCHED_DB": f"sqlite:///{tmp_path / 'db.sqlite'}"})
    assert result.exit_code == 2
    assert result.stderr == (f"metasched: error: bad --config: {config}: unknown setting 'submit_paralel' "
                             "(did you mean 'submit_parallel'?)\n")  # fmt: skip
    assert "Traceback" not in result.output and not (tmp_path / "db.sqlite").exists()
    missing = _serve("--config", str(tmp_path / "nope.toml"), "--once")
    assert missing.exit_code == 2 and "cannot read" in missing.stderr and missing.stderr.count("\n") == 1


def test_a_file_runs_one_real_period(tmp_path: Path) -> None:
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()  # no Slurm commands at all: the period fails its reads and reports it
    config = tmp_path / "metasched.toml"
    config.write_text(f'metrics_port = 0\nslurm_bin_dir = "{bin_dir}"\nstate_dir = "{tmp_path / "state"}"\n'
                      'decision_alternatives = 0\nlog_level = "WARNING"\n')  # fmt: skip
    result = _serve("--config", str(config), "--once", env={"METASCHED_DB": f"sqlite:///{tmp_path / 'db.sqlite'}"})
    assert result.exit_code == 0, result.output
    assert '"leader"' in result.output and (tmp_path / "state").is_dir()


def test_the_decision_log_settings_follow_the_retention() -> None:
    settings = dataclasses.replace(DEFAULTS, decision_retention="12h", decision_max_rows=5000, decision_alternatives=2)
    assert decision_log(settings) == DecisionLogSettings(True, 2, 12 * 3600.0, 5000)
    off = dataclasses.replace(DEFAULTS, decision_retention="off", decision_max_rows=0, decision_alternatives=0)
    assert decision_log(off) == DecisionLogSettings(False, 0, None, None)
    with pytest.raises(ServeError, match="bad --decision-retention") as info:
        decision_log(dataclasses.replace(DEFAULTS, decision_retention="soon"))
    assert info.value.code == 2


def test_the_site_name_comes_from_the_file_or_its_flag_and_a_bad_one_refuses_the_start(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert settings_from({"site_name": "production"}).site_name == "production" and DEFAULTS.site_name is None
    seen = _capture(monkeypatch)
    config = tmp_path / "metasched.toml"
    config.write_text('site_name = "staging"\n')
    assert _serve("--config", str(config), "--once").exit_code == 0 and seen[-1][0].site_name == "staging"
    assert _serve("--config", str(config), "--once", "--site-name", "prod").exit_code == 0
    assert seen[-1][0].site_name == "prod"
    with pytest.raises(ServeError, match="bad --site-name"):
        check_settings(dataclasses.replace(DEFAULTS, site_name="a\tb"))


@pytest.mark.parametrize(
    ("clusters", "want"),
    [
        (("emu", "emu=/etc/slurm-dev2/slurm.conf"), "listed twice"),
        (("emu", "dev2"), "only one cluster may use the daemon's own slurm.conf"),
        (("dev/2=/etc/x.conf",), "not a cluster name"),
        (("dev2=relative.conf",), "absolute path"),
        (("x" * 21,), "not a cluster name"),
        (("dev2=-X",), "absolute path (or -M)"),
        (("auto", "auto"), "'auto' is listed twice"),
    ],
)
def test_a_bad_clusters_list_refuses_the_start(clusters: tuple[str, ...], want: str) -> None:
    with pytest.raises(ServeError, match=f"bad --clusters: .*{re.escape(want)}") as info:
        check_settings(dataclasses.replace(DEFAULTS, clusters=clusters))
    assert info.value.code == 2


def test_clusters_come_from_the_file_or_the_flag_and_adoption_needs_one_cluster(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    assert settings_from({"clusters": ["emu", "dev2=/etc/slurm-dev2/slurm.conf"]}).clusters == (
        "emu", "dev2=/etc/slurm-dev2/slurm.conf")  # fmt: skip
    seen = _capture(monkeypatch)
    assert _serve("--once", "--clusters", "emu, dev2=/etc/slurm-dev2/slurm.conf").exit_code == 0
    assert seen[-1][0].clusters == ("emu", "dev2=/etc/slurm-dev2/slurm.conf")
    check_settings(dataclasses.replace(DEFAULTS, clusters=("emu",), managed_partitions=("managed",)))  # one: fine
    with pytest.raises(ServeError, match="single cluster only"):
        check_settings(dataclasses.replace(DEFAULTS, clusters=("emu", "dev2=/x.conf"), managed_partitions=("managed",)))


def test_auto_and_by_name_entries_are_read() -> None:
    from meta.serve.slurm_access import parse_clusters

    site = parse_clusters(["auto", "emu", "dev2=-M", "dev3=/etc/slurm-dev3/slurm.conf"])
    assert site.auto and site.several
    assert [(a.name, a.slurm_conf, a.by_name) for a in site.clusters] == [
        ("emu", None, False), ("dev2", None, True), ("dev3", "/etc/slurm-dev3/slurm.conf", False)]  # fmt: skip
    assert parse_clusters(["emu", "dev2=-M"]).several and not parse_clusters(["emu"]).several
    assert parse_clusters(["auto"]).several  # a site that follows slurmdbd: names are qualified
    with pytest.raises(ServeError, match="single cluster only"):
        check_settings(dataclasses.replace(DEFAULTS, clusters=("auto",), managed_partitions=("managed",)))
