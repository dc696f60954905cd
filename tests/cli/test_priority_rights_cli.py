"""Priority is a right, as users meet it (issue 21): ``metasched submit`` and ``tenant set --allow-class`` through the API.

alice (uid 1001, a plain member of tenant-a) is refused a job file naming ``inference-deadline``
or carrying a deadline, in sbatch's line and exit 1, with nothing stored; once an admin allows the
class for tenant-a the same file is accepted, and clearing the list refuses it again.
"""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from meta.service.api import Service
from tests.api_support import RunningApi, client_env, sqlite_running_api

REFUSAL = "metasched: error: Batch job submission failed: Invalid qos specification: priority class inference-deadline"
JOB = """kind: inference
name: {name}
tenant: tenant-a
partitions: 2
output: {output}
resources: {{cpus: 1, gpus: 1}}
command: python infer.py
"""


@pytest.fixture
def api(tmp_path: Path) -> Iterator[tuple[RunningApi, Service]]:
    """api is the API over a SQLite store on a socket in tmp_path."""
    with sqlite_running_api(tmp_path) as pair:
        yield pair


def _run(api: RunningApi, folder: Path, *args: str, uid: int) -> Result:
    result = CliRunner().invoke(
        cli, list(args), env=client_env(api.address, folder, uid), prog_name="metasched"
    )
    assert "Traceback" not in result.output, result.output
    return result


def _job_file(folder: Path, name: str, extra: str = "") -> str:
    path = folder / f"{name}.yaml"
    path.write_text(JOB.format(name=name, output=folder / "out") + extra)
    return str(path)


def test_a_member_is_refused_a_higher_class_until_an_admin_allows_it(
    api: tuple[RunningApi, Service], tmp_path: Path
) -> None:
    running, service = api
    boosted = _job_file(tmp_path, "boosted", "priority_class: inference-deadline\n")
    refused = _run(running, tmp_path, "submit", "-f", boosted, uid=1001)
    assert refused.exit_code == 1 and refused.stderr.startswith(REFUSAL), refused.stderr
    assert refused.stderr.count("\n") == 1 and service.list_jobs() == []
    with_deadline = _job_file(tmp_path, "urgent", "deadline: 2030-01-01T00:00:00Z\n")
    refused = _run(running, tmp_path, "submit", "-f", with_deadline, uid=1001)
    assert refused.exit_code == 1, refused.output
    assert refused.stderr.startswith(
        "metasched: error: Batch job submission failed: a deadline is not allowed"
    )
    assert service.list_jobs() == []

    allowed = _run(
        running, tmp_path, "tenant", "set", "tenant-a", "--allow-class", "inference-deadline", uid=0
    )
    assert allowed.exit_code == 0 and "classes allowed inference-deadline" in allowed.stdout, allowed.output
    shown = json.loads(_run(running, tmp_path, "tenant", "show", "tenant-a", uid=1001).stdout)
    assert shown["priority_classes"] == ["inference-deadline"]
    assert _run(running, tmp_path, "submit", "-f", boosted, uid=1001).exit_code == 0
    assert _run(running, tmp_path, "submit", "-f", with_deadline, uid=1001).exit_code == 0
    assert len(service.list_jobs()) == 2

    member_try = _run(running, tmp_path, "tenant", "set", "tenant-a", "--allow-class", "none", uid=1001)
    assert member_try.exit_code == 1 and "only an admin" in member_try.stderr
    cleared = _run(running, tmp_path, "tenant", "set", "tenant-a", "--allow-class", "none", uid=0)
    assert cleared.exit_code == 0 and "classes allowed" not in cleared.stdout
    assert _run(running, tmp_path, "submit", "-f", boosted, uid=1001).exit_code == 1
    unknown = _run(running, tmp_path, "tenant", "set", "tenant-a", "--allow-class", "urgent", uid=0)
    assert unknown.exit_code == 2 and "unknown priority class 'urgent'" in unknown.stderr


def test_msbatch_reads_a_priority_refusal_as_sbatch_does(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    # msbatch has no option that asks for a class (sbatch's --priority and --deadline are refused as
    # unsupported), so the API's refusal is planted: msbatch must print sbatch's line and exit 1
    from cli.client import ApiError
    from cli.sbatch import msbatch

    words = (
        "Invalid qos specification: priority class inference-deadline is above this inference job's own class"
    )

    class Refusing:
        def submit(self, **_: object) -> None:
            raise ApiError(403, "PriorityNotAllowed", words)

    monkeypatch.setattr(msbatch, "backend", lambda options: Refusing())
    script = tmp_path / "job.sh"
    script.write_text("#!/bin/bash\n#SBATCH -A tenant-a\nhostname\n")
    result = CliRunner().invoke(msbatch.main, [str(script)], prog_name="msbatch", env={"METASCHED_DB": None})
    assert (result.exit_code, result.stderr) == (1, f"msbatch: error: Batch job submission failed: {words}\n")
