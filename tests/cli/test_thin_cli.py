"""The thin CLI (``deploy/install-cli`` without --full: click only) runs every API-path command.

Each command runs in a child Python where the full install's dependencies cannot be imported,
against a stub API that answers every request 404: it must get as far as the API's answer, never
stop at "this needs the full metasched install".
"""

from __future__ import annotations

import http.server
import socketserver
import subprocess
import sys
import threading
from collections.abc import Iterator
from pathlib import Path

import pytest

REPO = Path(__file__).resolve().parents[2]
# what install-cli's thin mode leaves out (requirements/thin.txt is click alone)
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


class _Stub(http.server.BaseHTTPRequestHandler):
    """_Stub answers every request as the API answers an unknown job: 404 with a JSON error."""

    def _answer(self) -> None:
        self.rfile.read(int(self.headers.get("Content-Length") or 0))
        body = b'{"error": "NotFound", "message": "stub API: nothing here"}'
        self.send_response(404)
        self.send_header("Content-Type", "application/json")
        self.send_header("Content-Length", str(len(body)))
        self.end_headers()
        self.wfile.write(body)

    do_GET = do_POST = do_PUT = do_DELETE = _answer

    def log_message(self, *args: object) -> None:
        """log_message keeps the stub quiet."""

    def address_string(self) -> str:
        """address_string: a unix socket's peer has no host."""
        return "unix"


class _UnixHTTPServer(socketserver.ThreadingMixIn, socketserver.UnixStreamServer):
    daemon_threads = True


@pytest.fixture
def stub_api(tmp_path: Path) -> Iterator[str]:
    """stub_api is the address of a stub API on a unix socket."""
    server = _UnixHTTPServer(str(tmp_path / "api.sock"), _Stub)
    thread = threading.Thread(target=server.serve_forever, daemon=True)
    thread.start()
    yield f"unix://{tmp_path}/api.sock"
    server.shutdown()
    server.server_close()


def _run(tmp_path: Path, api: str, module: str, *args: str) -> subprocess.CompletedProcess[str]:
    argv = [module, *args]
    code = CHILD.format(blocked=set(FULL_ONLY), argv=argv, module=module)
    env = {"PATH": "/usr/bin:/bin", "METASCHED_API": api, "HOME": str(tmp_path), "PYTHONPATH": str(REPO),
           "METASCHED_CREDENTIAL_FILE": str(tmp_path / "credential"),
           "METASCHED_ATTEMPT_ID": "a", "METASCHED_FENCING_TOKEN": "1", "METASCHED_ATTEMPT_SECRET": "s",
           "METASCHED_SECRET_NAMES": "TOKEN"}  # fmt: skip
    return subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, cwd=tmp_path, env=env,
                          input="value\n", timeout=60)  # fmt: skip


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
        ("cli.main", ("release", "j1234567")),
        ("cli.main", ("retry", "j1234567")),
        ("cli.main", ("explain", "j1234567", "--history")),
        ("cli.main", ("outputs", "j1234567")),
        ("cli.main", ("checkpoint", "list", "j1234567")),
        ("cli.main", ("checkpoint", "report", "--step", "1", "--path", "/ck", "--attempt", "a", "--token", "1")),
        ("cli.main", ("commit", "--dir", "out", "--attempt", "a", "--token", "1")),
        ("cli.main", ("job", "secrets", "--export")),
        ("cli.main", ("secret", "list", "tenant-a")),
        ("cli.main", ("secret", "set", "tenant-a", "X")),
        ("cli.main", ("tenant", "show", "tenant-a")),
        ("cli.main", ("tenant", "set", "tenant-a", "--guaranteed", "a100=1")),
        ("cli.main", ("audit",)),
        ("cli.main", ("cluster", "drain", "dev2", "--reason", "firmware")),
        ("cli.main", ("cluster", "resume", "dev2")),
        ("cli.main", ("cluster", "list")),
        ("cli.main", ("whoami",)),
        ("cli.main", ("web",)),
        ("cli.sbatch.msbatch", ("-A", "tenant-a", "--wrap", "true")),
        ("cli.sbatch.msbatch", ("job.sh",)),
        ("cli.sbatch.msqueue", ()),
        ("cli.sbatch.msqueue", ("-O", "JobID,State,ReasonList", "-t", "PD")),
        ("cli.sbatch.mscancel", ("j1234567",)),
    ],
)
def test_an_api_command_needs_nothing_beyond_click(
    tmp_path: Path, stub_api: str, module: str, args: tuple[str, ...]
) -> None:
    (tmp_path / "credential").write_text("uid=1000\n")
    (tmp_path / "job.yaml").write_text("kind: evaluation\nname: m\ntenant: tenant-a\nresources: {gpus: 1}\ncommand: 'true'\n")
    (tmp_path / "out").mkdir()
    (tmp_path / "out" / "part.txt").write_text("rows\n")
    (tmp_path / "job.sh").write_text("#!/bin/bash\n#SBATCH -A tenant-a\n#SBATCH --gres=gpu:1\ntrue\n")
    done = _run(tmp_path, stub_api, module, *args)
    assert "full metasched install" not in done.stderr and "Traceback" not in done.stderr, done.stderr
    assert done.returncode == 1 and "stub API: nothing here" in done.stderr, (done.returncode, done.stderr)


def test_the_blocker_itself_works(tmp_path: Path) -> None:
    """A command that does need the full install says so (the child really cannot import them)."""
    done = _run(tmp_path, "unix:///nonexistent.sock", "cli.main", "--db", f"sqlite:///{tmp_path}/x.db", "list")
    assert done.returncode == 1 and "full metasched install" in done.stderr, done.stderr
