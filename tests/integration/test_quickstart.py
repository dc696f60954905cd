"""deploy/quickstart cannot lie (issue 20): it exits 0 only when every example succeeded, else 1 with one line.

Each run takes the cluster lock (``slurm_exclusive``: the quickstart's daemon cancels metasched
jobs it does not own) and keeps to its own folders: its store (XDG_DATA_HOME), state, logs and
secrets under ``tmp_path``, its API on a socket of its own and no TCP listener, so it disturbs
neither the host's ``/run/metasched`` nor the other real-Slurm tests. ``--no-install`` keeps
``/opt/metasched`` as deploy/run-tests installed it: ``metasched`` is this checkout, run by this
interpreter. About a minute per run.
"""

from __future__ import annotations

import os
import re
import shutil
import subprocess
import sys
import tempfile
from collections.abc import Iterator
from pathlib import Path

import pytest

pytestmark = pytest.mark.slurm

REPO = Path(__file__).resolve().parents[2]
BROKEN = """\
kind: evaluation
name: broken-example
tenant: tenant-a
resources:
  cpus: 1
  memory: 1Gi
  gpus: 1
time_limit: 5m
command: |
  echo "this example fails on purpose"
  exit 1
"""


@pytest.fixture
def quickstart_env(tmp_path: Path) -> Iterator[dict[str, str]]:
    """quickstart_env is the environment of a quickstart run that keeps to tmp_path and a socket of its own."""
    bin_dir = tmp_path / "bin"
    bin_dir.mkdir()
    wrapper = bin_dir / "metasched"
    wrapper.write_text(
        f"#!/bin/sh\nPYTHONPATH={REPO} exec {sys.executable} -c 'from cli.main import main; main()' \"$@\"\n"
    )
    wrapper.chmod(0o755)
    sock_dir = tempfile.mkdtemp(prefix="msqs-", dir="/tmp")  # a Unix socket path stays under 108 bytes
    sock = f"{sock_dir}/api.sock"
    env = {
        **os.environ,
        "PATH": f"{bin_dir}:{os.environ.get('PATH', '/usr/bin:/bin')}",
        "METASCHED_API": f"unix://{sock}",
        "METASCHED_QUICKSTART_DIR": str(tmp_path / "qs"),
        "METASCHED_QUICKSTART_SERVE_ARGS": f"--api-socket {sock} --api-listen off --secrets-root {tmp_path / 'secrets'}",
        "XDG_DATA_HOME": str(tmp_path / "data"),  # the embedded SQLite store
        "XDG_STATE_HOME": str(tmp_path / "state"),
    }
    for name in ("METASCHED_DB", "METASCHED_DB_FILE", "METASCHED_STATE_DIR", "METASCHED_CONFIG"):
        env.pop(name, None)
    yield env
    shutil.rmtree(sock_dir, ignore_errors=True)


def _quickstart(env: dict[str, str], examples: Path) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [str(REPO / "deploy" / "quickstart"), "--no-install", "--examples", str(examples)],
        cwd=REPO, env=env, capture_output=True, text=True, timeout=900, stdin=subprocess.DEVNULL,
    )  # fmt: skip


def _examples(tmp_path: Path, broken: bool) -> Path:
    folder = tmp_path / "examples"
    shutil.copytree(REPO / "examples", folder)
    if broken:
        (folder / "broken.yaml").write_text(BROKEN)
    return folder


def test_the_quickstart_fails_in_one_line_naming_the_broken_example(
    slurm_exclusive: None, quickstart_env: dict[str, str], tmp_path: Path
) -> None:
    examples = _examples(tmp_path, broken=True)
    run = _quickstart(quickstart_env, examples)
    assert run.returncode == 1, run.stdout[-3000:] + run.stderr[-3000:]
    failed = [line for line in run.stderr.splitlines() if line.startswith("quickstart FAILED")]
    assert len(failed) == 1, run.stderr
    # the one broken example, its job, state and reason; the three good ones succeeded ("and N more" absent)
    assert re.fullmatch(rf"quickstart FAILED: {re.escape(str(examples))}/broken\.yaml: job j\w+ is failed: .*exit 1.*",
                        failed[0]), failed[0]  # fmt: skip
    assert "stopped metasched serve" in run.stdout


def test_every_example_succeeds_and_status_shows_the_real_log_files(
    slurm_exclusive: None, quickstart_env: dict[str, str], tmp_path: Path
) -> None:
    run = _quickstart(quickstart_env, _examples(tmp_path, broken=False))
    assert run.returncode == 0, run.stdout[-3000:] + run.stderr[-3000:]
    assert "quickstart: all 3 examples succeeded" in run.stdout
    logs = re.findall(r"\): stdout (\S+)", run.stdout)
    assert len(logs) == 6, run.stdout  # eval 1 + inference 4 + training 1 attempts
    for path in logs:  # where Slurm wrote them: serve's --log-dir, not slurm-<id>.out in the checkout
        assert path.startswith(f"{tmp_path}/qs/logs/") and Path(path).is_file(), path
    # the secret train.yaml declares was set, in this run's secrets root
    assert (tmp_path / "secrets" / "tenant-a" / "WANDB_API_KEY").is_file()
