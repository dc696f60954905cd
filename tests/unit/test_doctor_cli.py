"""metasched doctor, the command: serve's settings and flags, one line per check, exit 0/1/2, --json."""

from __future__ import annotations

import json
from pathlib import Path

import pytest
from click.testing import CliRunner

from cli import doctor_cmd
from cli.main import cli
from cli.serve_cmd import serve
from meta.serve.doctor.check import Check, fail, ok, warn
from meta.serve.doctor.inputs import DoctorInputs


@pytest.fixture
def seen(monkeypatch: pytest.MonkeyPatch) -> list[DoctorInputs]:
    """seen collects the inputs doctor ran with; the checks answer ok, warn."""
    got: list[DoctorInputs] = []

    def canned(inputs: DoctorInputs) -> list[Check]:
        got.append(inputs)
        return [ok("store", "answers"), warn("private-data", "PrivateData=none")]

    monkeypatch.setattr(doctor_cmd, "run_checks", canned)
    monkeypatch.delenv("METASCHED_MANAGED_PARTITIONS", raising=False)
    return got


def run(*args: str) -> tuple[int, str, str]:
    """run is ``metasched doctor ARGS``: (exit code, stdout, stderr)."""
    done = CliRunner().invoke(cli, ["doctor", *args])
    return done.exit_code, done.stdout, done.stderr


def test_the_doctor_takes_serves_own_options() -> None:
    mine = {param.name: param for param in doctor_cmd.doctor.params}
    for name in doctor_cmd.SHARED:
        assert mine[name] is next(param for param in serve.params if param.name == name)


def test_warnings_pass_one_line_per_check_and_a_summary(seen: list[DoctorInputs], tmp_path: Path) -> None:
    code, out, _ = run("--db", f"sqlite:///{tmp_path / 's.sqlite'}")
    assert code == 0
    assert out.splitlines() == ["ok   store: answers", "warn private-data: PrivateData=none", "all is well (1 warning)"]
    assert seen[0].db_url == f"sqlite:///{tmp_path / 's.sqlite'}"


def test_a_failed_check_exits_1(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(doctor_cmd, "run_checks", lambda _inputs: [fail("store", "empty: run metasched db upgrade")])
    code, out, _ = run()
    assert code == 1 and "FAIL store: empty: run metasched db upgrade" in out and "1 of 1 checks failed" in out


def test_json(seen: list[DoctorInputs]) -> None:
    code, out, _ = run("--json")
    assert code == 0 and json.loads(out) == {"ok": True, "checks": [
        {"name": "store", "status": "ok", "message": "answers"},
        {"name": "private-data", "status": "warn", "message": "PrivateData=none"}]}


def test_the_settings_file_then_the_flags(seen: list[DoctorInputs], tmp_path: Path) -> None:
    config = tmp_path / "metasched.toml"
    config.write_text('managed_partitions = ["managed"]\nmunge_socket = "/run/munge/x"\njob_api = "http://h:9465"\n')
    assert run("--config", str(config))[0] == 0
    assert seen[-1].settings.managed_partitions == ("managed",) and seen[-1].settings.munge_socket == "/run/munge/x"
    assert run("--config", str(config), "--managed-partitions", "a,b", "--job-api", "unix:///tmp/a.sock")[0] == 0
    assert seen[-1].settings.managed_partitions == ("a", "b") and seen[-1].settings.job_api == "unix:///tmp/a.sock"
    assert seen[-1].settings.munge_socket == "/run/munge/x"


def test_slurm_conf_is_the_flag(seen: list[DoctorInputs], tmp_path: Path) -> None:
    conf = tmp_path / "slurm.conf"
    conf.write_text("ClusterName=x\n")
    assert run("--slurm-conf", str(conf), "--probe-partition", "t4")[0] == 0
    assert seen[-1].slurm_conf == conf and seen[-1].probe_partition == "t4"


@pytest.mark.parametrize("args, said", [
    (("--config", "/nonexistent/metasched.toml"), "bad --config"),
    (("--db", "mysql://x/y"), "unsupported database"),
    (("--job-api", "ftp://x"), "bad --job-api"),
    (("--slurm-conf", "/nonexistent/slurm.conf"), "does not exist"),
])
def test_bad_input_exits_2_in_one_line(seen: list[DoctorInputs], args: tuple[str, ...], said: str) -> None:
    code, _, err = run(*args)
    assert code == 2 and said in err and "Traceback" not in err and not seen
