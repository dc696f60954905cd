"""The thin CLI (``deploy/install-cli`` without --full: click only) runs every API-path command.

Each command runs in a child Python where the full install's dependencies cannot be imported;
against an address where nothing listens it must get as far as the API ("cannot reach"), never
stop at "this needs the full metasched install".
"""

from __future__ import annotations

import subprocess
import sys
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what install-cli's thin mode leaves out (THIN_DEPS is click alone)
FULL_ONLY = ("yaml", "pydantic", "sqlalchemy", "alembic", "psycopg", "prometheus_client", "fastapi", "starlette",
             "uvicorn", "hypothesis")  # fmt: skip
CHILD = """
import importlib.abc, sys
class Blocked(importlib.abc.MetaPathFinder):
    def find_spec(self, name, path=None, target=None):
        if name.split(".")[0] in {blocked!r}:
            raise ModuleNotFoundError(f"No module named {{name!r}}", name=name)
        return None
sys.meta_path.insert(0, Blocked())
sys.argv = {argv!r}
from {module} import main
main()
"""


def _run(tmp_path: Path, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [module, *args]
    code = CHILD.format(blocked=set(FULL_ONLY), argv=argv, module=module)
    env = {"PATH": "/usr/bin:/bin", "METASCHED_API": f"unix://{tmp_path}/nothing.sock", "HOME": str(tmp_path),
           "METASCHED_CREDENTIAL_FILE": str(tmp_path / "credential"), "PYTHONPATH": str(REPO)}  # fmt: skip
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                          timeout=60)  # fmt: skip


@pytest.mark.parametrize(
    ("module", "args"),
    [
        ("cli.main", ("submit", "-f", "job.yaml")),
        ("cli.main", ("submit", "-f", "job.yaml", "-f", "job.yaml")),
        ("cli.main", ("list",)),
        ("cli.main", ("status", "j1234567")),
        ("cli.main", ("explain", "j1234567")),
        ("cli.main", ("cancel", "j1234567")),
        ("cli.main", ("hold", "j1234567")),
        ("cli.msbatch", ("-A", "tenant-a", "--wrap", "true")),
        ("cli.msbatch", ("job.sh",)),
        ("cli.msqueue", ()),
        ("cli.mscancel", ("j1234567",)),
    ],
)
def test_an_api_command_needs_nothing_beyond_click(tmp_path: Path, module: str, args: tuple[str, ...]) -> None:
    (tmp_path / "credential").write_text("uid=1000\n")
    (tmp_path / "job.yaml").write_text("kind: evaluation\nname: m\ntenant: tenant-a\nresources: {gpus: 1}\ncommand: 'true'\n")
    (tmp_path / "job.sh").write_text("#!/bin/bash\n#SBATCH -A tenant-a\n#SBATCH --gres=gpu:1\ntrue\n")
    done = _run(tmp_path, module, *args)
    assert "full metasched install" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1 and "cannot reach the metasched API" in done.stderr, (done.returncode, done.stderr)


def test_the_blocker_itself_works(tmp_path: Path) -> None:
    """A command that does need the full install says so (the child really cannot import them)."""
    done = _run(tmp_path, "cli.main", "--db", f"sqlite:///{tmp_path}/x.db", "list")
    assert done.returncode == 1 and "full metasched install" in done.stderr, done.stderr
