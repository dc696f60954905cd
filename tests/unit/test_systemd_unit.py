"""deploy/systemd/metasched.service in step with the code: the command, its flags, the paths serve writes, the capabilities.

The unit is parsed as INI (systemd's keys may repeat, so by hand); ``systemd-analyze verify`` is
not needed for these facts and is not installed in CI.
"""

from __future__ import annotations

import re
import shlex
import tomllib
from pathlib import Path

import click
import pytest

from cli.main import cli
from meta.config.paths import default_state_dir
from meta.serve.api_start import DEFAULT_ROOT_SOCKET
from meta.serve.doctor.identity import NEEDED_CAPS
from meta.serve.settings import DEFAULTS
from meta.serve.settings_file import SITE_CONFIG
from meta.store.db import FILE_ENV_VAR, default_sqlite_path

REPO = Path(__file__).resolve().parents[2]
UNIT = REPO / "deploy" / "systemd" / "metasched.service"


def parse_unit(text: str) -> dict[str, list[tuple[str, str]]]:
    """parse_unit reads a unit file: section -> [(key, value)], repeated keys kept in order."""
    sections: dict[str, list[tuple[str, str]]] = {}
    current = None
    for raw in text.splitlines():
        stripped = raw.strip()
        if not stripped or stripped.startswith(("#", ";")):
            continue
        if stripped.startswith("[") and stripped.endswith("]"):
            current = sections.setdefault(stripped[1:-1], [])
            continue
        key, sep, value = stripped.partition("=")
        assert sep and current is not None, f"not a unit line: {raw!r}"
        current.append((key.strip(), value.strip()))
    return sections


SERVICE = parse_unit(UNIT.read_text())["Service"]


def values(key: str) -> list[str]:
    """values are every value of ``key`` in [Service], in order."""
    return [value for name, value in SERVICE if name == key]


def one(key: str) -> str:
    """one is the single value of ``key`` in [Service]."""
    found = values(key)
    assert len(found) == 1, f"{key}: {found}"
    return found[0]


def environment() -> dict[str, str]:
    """environment is what the unit's Environment= lines set."""
    pairs = [pair for value in values("Environment") for pair in shlex.split(value)]
    return dict(pair.split("=", 1) for pair in pairs)


def test_exec_start_is_the_installed_metasched_serve_with_the_site_config() -> None:
    argv = shlex.split(one("ExecStart"))
    scripts = tomllib.loads((REPO / "pyproject.toml").read_text())["project"]["scripts"]
    bin_dir = re.search(r"BIN_DIR=\$\{METASCHED_BIN_DIR:-(\S+)\}", (REPO / "deploy" / "install-cli").read_text())
    assert bin_dir and Path(argv[0]) == Path(bin_dir.group(1)) / "metasched" and "metasched" in scripts
    assert argv[1:] == ["serve", "--config", SITE_CONFIG]


def test_every_flag_of_exec_start_is_an_option_of_serve() -> None:
    argv = shlex.split(one("ExecStart"))
    with click.Context(cli) as ctx:
        serve = cli.get_command(ctx, argv[1])
    assert serve is not None
    options = {opt for param in serve.params for opt in param.opts}
    assert [arg for arg in argv[2:] if arg.startswith("-")] == ["--config"] and "--config" in options


def test_the_config_path_is_the_documented_one() -> None:
    assert SITE_CONFIG == "/etc/metasched/metasched.toml"
    assert SITE_CONFIG in (REPO / "deploy" / "metasched.toml.example").read_text().splitlines()[0]


def test_simple_restart_on_failure_and_the_journal() -> None:
    sources = "".join(path.read_text() for path in (REPO / "meta").rglob("*.py"))
    assert one("Type") == "simple" and "NOTIFY_SOCKET" not in sources  # notify only once serve calls sd_notify
    assert one("Restart") == "on-failure"
    assert one("StandardOutput") == "journal" and one("StandardError") == "journal"


def test_root_with_only_the_capabilities_the_doctor_checks() -> None:
    assert one("User") == "root"
    assert set(one("CapabilityBoundingSet").split()) == set(NEEDED_CAPS)
    assert one("NoNewPrivileges") == "yes" and one("ProtectSystem") in ("full", "strict")


def test_the_store_url_comes_from_its_file() -> None:
    assert environment()[FILE_ENV_VAR] == "/etc/metasched/db-url"


@pytest.fixture
def written(monkeypatch: pytest.MonkeyPatch) -> dict[str, Path]:
    """written are the paths serve writes to, by ServeSettings' defaults, in the unit's environment and as root."""
    for name, value in environment().items():
        monkeypatch.setenv(name, value)
    state = Path(DEFAULTS.state_dir) if DEFAULTS.state_dir else default_state_dir()
    return {
        "state_dir": state,
        "log_dir": Path(DEFAULTS.log_dir) if DEFAULTS.log_dir else state / "logs",
        "sqlite store": default_sqlite_path().parent,
        "api_socket": (Path(DEFAULTS.api_socket) if DEFAULTS.api_socket else DEFAULT_ROOT_SOCKET).parent,
        "secrets_root": Path(DEFAULTS.secrets_root),
    }


def test_every_read_write_path_is_one_serve_writes_and_each_is_covered(written: dict[str, Path]) -> None:
    paths = [Path(path.lstrip("-")) for value in values("ReadWritePaths") for path in value.split()]
    assert paths and all(path in written.values() for path in paths), (paths, written)
    for what, path in written.items():
        assert any(path == rw or rw in path.parents for rw in paths), f"{what} {path} is not writable under the unit"


def test_systemd_makes_the_state_and_socket_folders(written: dict[str, Path]) -> None:
    assert Path("/var/lib") / one("StateDirectory") == written["state_dir"] and one("StateDirectoryMode") == "0700"
    assert Path("/run") / one("RuntimeDirectory") == written["api_socket"]
    assert Path("/etc") / one("ConfigurationDirectory").split()[1] == written["secrets_root"]
