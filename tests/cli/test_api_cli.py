"""``metasched`` and ``msbatch`` end to end through the API: a real uvicorn on a temporary Unix socket.

The commands are the ones users run, with METASCHED_API pointing at the socket and the
credential coming from METASCHED_CREDENTIAL_FILE (the test-only authenticator reads its uid).
Also: the thin start-up (no SQLAlchemy, pydantic, FastAPI or store on the API path, checked in
a fresh interpreter), local mode refused to anyone but root, and one-line errors for each way
the API can fail.
"""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli import credentials
from cli.main import LAZY, cli
from cli.sbatch.msbatch import main as msbatch
from meta.service.api import Service
from tests.api_support import (
    RunningApi,
    alices_attempt,
    client_env,
    credential,
    payload_digest,
    sqlite_running_api,
)
from tests.conftest import pg_url
from tests.runtime.support import checkpointing, inference

REPO = Path(__file__).resolve().parents[2]
EXAMPLES = REPO / "examples"
TRAIN, INFER, EVAL = EXAMPLES / "train.yaml", EXAMPLES / "infer.yaml", EXAMPLES / "eval.yaml"
HEAVY = ("sqlalchemy", "alembic", "pydantic", "fastapi", "starlette", "uvicorn", "meta.store", "meta.service",
         "meta.cycle", "psycopg", "yaml")

Run = Callable[..., Result]


@pytest.fixture
def sqlite_api(tmp_path: Path) -> Iterator[tuple[RunningApi, Service]]:
    """sqlite_api is the API over a SQLite store, for the tests that need one backend only."""
    with sqlite_running_api(tmp_path) as pair:
        yield pair


def runner(address: str, folder: Path) -> Run:
    """runner returns ``run(*args, uid=0, tenant=None, prog=cli, input=None)`` that checks each result's hygiene."""

    def run(*args: Any, uid: int = 0, tenant: str | None = None, prog: Any = cli, input: str | None = None) -> Result:
        env = {
            **client_env(address, folder, uid),
            "METASCHED_TENANT": tenant,
            "METASCHED_DEBUG": os.environ.get("METASCHED_DEBUG"),
            "SBATCH_ACCOUNT": None,
        }
        name = "msbatch" if prog is msbatch else "metasched"
        result = CliRunner().invoke(prog, [str(a) for a in args], env=env, prog_name=name, input=input)
        assert "Traceback" not in result.output, result.output
        if result.exception is not None:
            assert isinstance(result.exception, SystemExit), repr(result.exception)
        if result.exit_code != 0 and prog is cli:
            assert result.stderr.startswith("metasched: error: ") and result.stderr.count("\n") == 1, result.stderr
        return result

    return run


@pytest.fixture
def run(api: RunningApi, tmp_path: Path) -> Run:
    return runner(api.address, tmp_path)


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def as_json(result: Result) -> Any:
    return json.loads(ok(result))


# --- the job flow through the API, on SQLite and PostgreSQL -----------------------------------


def test_list_fills_its_columns_for_more_jobs_than_one_queue_call_names(run: Run) -> None:
    """list pages its GET /v1/queue calls by the route's bound on job ids (it refused 65 at once)."""
    from meta.model.api_operations import MAX_QUEUE_JOB_IDS

    count = MAX_QUEUE_JOB_IDS + 1
    for _ in range(count):
        ok(run("submit", "-f", EVAL))
    listed = as_json(run("list", "--json"))
    assert len(listed) == count
    assert all(j["time_limit_s"] for j in listed)  # the queue's fields, for every job


def test_the_job_commands_through_the_api(run: Run) -> None:
    train = ok(run("submit", "-f", TRAIN)).strip()
    infer = as_json(run("submit", "-f", INFER, "--key", "k1", "--json"))
    assert infer["created"] is True and as_json(run("submit", "-f", INFER, "--key", "k1", "--json"))["created"] is False
    assert [j["short_id"] for j in as_json(run("list", "--json"))] == [infer["short_id"], train]
    assert [j["short_id"] for j in as_json(run("list", "--tenant", "tenant-b", "--state", "pending", "--json"))] == [
        infer["short_id"]
    ]
    table = ok(run("list"))
    assert table.splitlines()[0].split() == [
        "JOB", "NAME", "TENANT", "KIND", "STATE", "TASKS", "TIME_LIMIT", "NODES", "SLURM", "REASON", "SUBMITTED",
    ]  # fmt: skip
    assert train in table and "4 pending" in table
    status = ok(run("status", train))
    assert status.startswith(f"job {train} (") and "llama-7b-finetune" in status
    assert as_json(run("status", infer["id"], "--json"))["task_list"][3]["name"] == "shard-003"
    assert "no scheduling cycle has considered it yet" in ok(run("explain", train))
    assert as_json(run("explain", train, "--json"))["tasks"][0]["state"] == "pending"
    assert "incomplete" in ok(run("outputs", infer["short_id"]))
    assert "recommended interval" in ok(run("checkpoint", "list", train))
    assert ok(run("cancel", infer["short_id"])).strip() == f"job {infer['short_id']}: cancelled"
    assert ok(run("retry", f"{infer['short_id']}/1")).strip() == "retrying 1 task(s): 1:shard-001"
    assert len(as_json(run("retry", infer["short_id"], "--json"))) == 3
    actions = [line["action"] for line in as_json(run("audit", "--json"))]
    assert actions[:3] == ["job.retry", "job.retry", "job.cancel"]
    me = as_json(run("whoami", "--json"))
    assert (me["user"], me["uid"], me["admin"]) == ("root", 0, True)


def test_several_files_are_submitted_together(run: Run) -> None:
    ids = ok(run("submit", "-f", TRAIN, "-f", INFER)).split()
    assert len(ids) == 2
    listed = as_json(run("list", "--json"))
    assert {j["short_id"] for j in listed} == set(ids)
    assert len({j["submitted_at"] for j in listed}) == 1  # one transaction: one submit time


def test_tenants_are_isolated_through_the_api(run: Run) -> None:
    ok(run("tenant", "set", "tenant-b", "--allow-class", "inference-deadline"))  # infer.yaml's deadline is a right
    bobs = ok(run("submit", "-f", INFER, uid=1002)).strip()  # bob, tenant-b
    mine = ok(run("submit", "-f", TRAIN, uid=1001)).strip()  # alice, tenant-a
    assert [j["short_id"] for j in as_json(run("list", "--json", uid=1001))] == [mine]
    for command in (("status", bobs), ("explain", bobs), ("outputs", bobs), ("cancel", bobs), ("retry", bobs)):
        result = run(*command, uid=1001)
        assert result.exit_code == 1 and "not found" in result.stderr and "tenant-b" not in result.stderr, command
    refused = run("submit", "-f", INFER, uid=1001)  # the file names tenant-b
    assert refused.exit_code == 2, refused.output
    refused = run("list", uid=1001, tenant="tenant-b")
    assert refused.exit_code == 2 and "Invalid account or account/partition combination specified" in refused.stderr
    assert as_json(run("status", bobs, "--json"))["state"] == "pending"  # root (admin) sees it, untouched


# --- msbatch through the API ------------------------------------------------------------------


def _script(folder: Path, *directives: str) -> Path:
    path = folder / "job.sh"
    path.write_text("#!/bin/bash\n" + "".join(f"#SBATCH {d}\n" for d in directives) + "hostname\n")
    return path


def test_msbatch_submits_through_the_api(sqlite_api: tuple[RunningApi, Service], tmp_path: Path) -> None:
    api, service = sqlite_api
    run = runner(api.address, tmp_path)
    script = _script(tmp_path, "-A tenant-a", "-N 2", "--gres=gpu:a100:2")
    out = ok(run(script, prog=msbatch, uid=1001))
    assert out.startswith("Submitted batch job j")
    job = out.split()[-1]
    status = service.status(job)
    assert status.spec["workers"] == 2 and status.summary.tenant == "tenant-a"
    again = run("--parsable", "--key", "k", script, prog=msbatch)
    first = ok(again).strip()
    repeat = run("--parsable", "--key", "k", script, prog=msbatch)
    assert ok(repeat).strip() == first and "already names job" in repeat.stderr


def test_msbatch_spec_refusals_read_as_before(sqlite_api: tuple[RunningApi, Service], tmp_path: Path) -> None:
    api, service = sqlite_api
    run = runner(api.address, tmp_path)
    result = run(_script(tmp_path, "-A 'bad tenant!'", "--output=/tmp/x-%j.out"), prog=msbatch)
    assert result.exit_code == 2, result.output
    assert result.stderr.startswith("msbatch: error: invalid job: tenant:"), result.stderr  # no note before it
    assert service.list_jobs() == []
    result = run(_script(tmp_path, "-A tenant-b"), prog=msbatch, uid=1001)  # not alice's tenant: sbatch's line
    refusal = "error: Batch job submission failed: Invalid account or account/partition combination specified\n"
    assert result.exit_code == 2 and result.stderr == f"msbatch: {refusal}", result.stderr
    result = run("submit", "-f", INFER, uid=1001)  # the file names tenant-b
    assert result.exit_code == 2 and result.stderr == f"metasched: {refusal}", result.stderr


# --- inside a job -----------------------------------------------------------------------------


def test_commit_and_checkpoint_report_from_a_job(sqlite_api: tuple[RunningApi, Service], tmp_path: Path,
                                                 monkeypatch: pytest.MonkeyPatch) -> None:
    api, service = sqlite_api
    run = runner(api.address, tmp_path)
    attempt, secret = alices_attempt(service, checkpointing(tenant="tenant-a"), node="node1")
    monkeypatch.setenv("METASCHED_ATTEMPT_ID", attempt)
    monkeypatch.setenv("METASCHED_FENCING_TOKEN", "1")
    monkeypatch.setenv("METASCHED_ATTEMPT_SECRET", secret)
    (tmp_path / "ck").write_bytes(b"x" * 42)
    view = as_json(run("checkpoint", "report", "--step", "7", "--path", tmp_path / "ck", "--json", uid=1001))
    assert (view["step"], view["size_bytes"], view["attempt_id"]) == (7, 42, attempt)
    monkeypatch.setenv("METASCHED_FENCING_TOKEN", "5")
    stale = run("checkpoint", "report", "--step", "8", "--path", "/ck/8", uid=1001)
    assert stale.exit_code == 1 and "token" in stale.stderr
    monkeypatch.setenv("METASCHED_FENCING_TOKEN", "1")
    monkeypatch.delenv("METASCHED_ATTEMPT_SECRET")
    unproven = run("checkpoint", "report", "--step", "9", "--path", "/ck/9", uid=1001)
    assert unproven.exit_code == 1 and "no attempt secret" in unproven.stderr

    attempt, secret = alices_attempt(service, inference(str(tmp_path / "out"), tenant="tenant-a"), node="node2")
    monkeypatch.setenv("METASCHED_ATTEMPT_SECRET", secret)
    staging = tmp_path / "staging"
    staging.mkdir()
    (staging / "part.jsonl").write_text("{}\n")
    argv = ("commit", "--dir", staging, "--attempt", attempt, "--token", "1")
    assert ok(run(*argv, uid=1001)).startswith("committed 1 file(s)")
    assert run(*argv, uid=1002).exit_code == 1  # bob cannot commit tenant-a's partition
    (staging / "link").symlink_to(tmp_path / "ck")
    refused = run(*argv, uid=1001)
    assert refused.exit_code == 2 and "'link'" in refused.stderr  # refused where the files are


def test_job_secrets_export_for_the_batch_script(sqlite_api: tuple[RunningApi, Service], tmp_path: Path,
                                                monkeypatch: pytest.MonkeyPatch) -> None:
    api, service = sqlite_api
    run = runner(api.address, tmp_path)
    value = "it's a $ecret; rm -rf / `x`"
    assert run("secret", "set", "tenant-a", "HF_TOKEN", input=value).exit_code == 0
    attempt, secret = alices_attempt(service, checkpointing(tenant="tenant-a", secrets=["HF_TOKEN"]), node="node1")
    for name, setting in (("METASCHED_ATTEMPT_ID", attempt), ("METASCHED_FENCING_TOKEN", "1"),
                          ("METASCHED_ATTEMPT_SECRET", secret), ("METASCHED_SECRET_NAMES", "HF_TOKEN")):
        monkeypatch.setenv(name, setting)
    assert run("job", "secrets", uid=1001).exit_code == 2  # no --export: values are never printed plainly
    exported = ok(run("job", "secrets", "--export", uid=1001))
    shell = subprocess.run(["bash", "-c", 'eval "$1"; printf %s "$HF_TOKEN"', "-", exported],
                           capture_output=True, text=True, check=True)  # fmt: skip
    assert shell.stdout == value.rstrip("\n")
    monkeypatch.setenv("METASCHED_ATTEMPT_SECRET", "not-the-secret-0123")
    failed = run("job", "secrets", "--export", uid=1001)
    assert failed.exit_code == 1 and failed.stdout == "" and "attempt secret" in failed.stderr
    monkeypatch.setenv("METASCHED_ATTEMPT_SECRET", secret)
    assert run("job", "secrets", "--export", uid=1002).exit_code == 1  # bob: another tenant's attempt


# --- tenants and secrets ----------------------------------------------------------------------


def test_tenants_and_secrets_through_the_api(sqlite_api: tuple[RunningApi, Service], tmp_path: Path) -> None:
    api, _ = sqlite_api
    run = runner(api.address, tmp_path)
    assert "guaranteed a100=4" in ok(run("tenant", "set", "tenant-a", "--guaranteed", "a100=4"))
    refused = run("tenant", "set", "tenant-a", "--weight", "2")
    assert refused.exit_code == 2 and "sacctmgr modify account" in refused.stderr
    assert run("tenant", "set", "tenant-a", "--guaranteed", "a100=1", uid=1001).exit_code == 1
    assert [t["name"] for t in as_json(run("tenant", "list", "--json", uid=1001))] == ["tenant-a"]
    assert json.loads(ok(run("tenant", "show", "tenant-a")))["guaranteed"] == {"a100": 4}
    assert ok(run("secret", "set", "tenant-a", "HF_TOKEN", input="v4lue\n")).strip() == "secret HF_TOKEN set for tenant-a"
    assert (tmp_path / "secrets" / "tenant-a" / "HF_TOKEN").read_text() == "v4lue"
    assert as_json(run("secret", "list", "tenant-a", "--json", uid=1001)) == ["HF_TOKEN"]
    assert run("secret", "list", "tenant-a", uid=1002).exit_code == 1
    assert run("secret", "list", "tenant-a", "--root", tmp_path).exit_code == 2  # the service's folder, not ours
    assert ok(run("secret", "delete", "tenant-a", "HF_TOKEN")).strip() == "secret HF_TOKEN deleted for tenant-a"
    assert "v4lue" not in ok(run("audit", "--json"))


# --- errors -----------------------------------------------------------------------------------


def test_each_way_the_api_fails_is_one_line(sqlite_api: tuple[RunningApi, Service], tmp_path: Path) -> None:
    api, _ = sqlite_api
    run = runner(api.address, tmp_path)
    garbage = tmp_path / "garbage"
    garbage.write_text("nonsense")
    result = CliRunner().invoke(cli, ["list"], prog_name="metasched", env={
        "METASCHED_API": api.address, "METASCHED_DB": None, "METASCHED_CREDENTIAL_FILE": str(garbage)})
    assert result.exit_code == 1 and result.stderr.startswith("metasched: error: malformed credential")
    result = CliRunner().invoke(cli, ["list"], prog_name="metasched", env={
        "METASCHED_API": api.address, "METASCHED_DB": None, "METASCHED_CREDENTIAL_FILE": str(tmp_path / "none")})
    assert result.exit_code == 1 and "METASCHED_CREDENTIAL_FILE" in result.stderr
    down = runner(f"unix://{tmp_path}/nobody.sock", tmp_path)("list")
    assert down.exit_code == 1 and "cannot reach the metasched API" in down.stderr and "no such socket" in down.stderr
    assert runner("ftp://somewhere", tmp_path)("list").exit_code == 2
    assert run("status", "jzzzzzzzz").exit_code == 1
    bad = tmp_path / "bad.yaml"
    bad.write_text("kind: training\nname: x\n")
    refused = run("submit", "-f", bad)
    assert refused.exit_code == 2 and refused.stderr.startswith("metasched: error: invalid job spec: ")
    assert run("submit", "-f", tmp_path / "missing.yaml").exit_code == 2
    assert run("retry", "jzzzzzzzz/first").exit_code == 2


def test_the_client_signs_exactly_what_the_service_sees(sqlite_api: tuple[RunningApi, Service], tmp_path: Path,
                                                          monkeypatch: pytest.MonkeyPatch) -> None:
    api, _ = sqlite_api
    run = runner(api.address, tmp_path)

    def bound(method: str, target: str, body: bytes, **_: Any) -> str:
        return f"uid=0;bind={payload_digest(method, target, body)}"

    monkeypatch.setattr(credentials, "credential_for", bound)
    job = ok(run("submit", "-f", INFER, "--key", "ключ/1 &x=y")).strip()  # a body with non-ASCII text
    ok(run("list", "--tenant", "tenant-b", "--state", "pending", "--limit", "5"))
    ok(run("status", job, tenant="tenant-b"))
    ok(run("cancel", job))
    ok(run("retry", f"{job}/2"))
    ok(run("secret", "set", "tenant-b", "TOKEN", input="ü\n"))
    ok(run("audit", "--since", "2000-01-01T00:00:00+00:00"))
    targets = [target for _, target, _ in api.authenticator.seen]
    assert "/v1/jobs?tenant=tenant-b&state=pending&limit=5" in targets
    assert any(t.startswith("/v1/audit?since=2000-01-01T00%3A00%3A00%2B00%3A00") for t in targets)


# --- local mode -------------------------------------------------------------------------------


def test_local_mode_is_for_root(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    store = tmp_path / "s.sqlite"
    assert CliRunner().invoke(cli, ["list"], env={"METASCHED_DB": f"sqlite:///{store}"}).exit_code == 0  # root
    monkeypatch.setattr(os, "geteuid", lambda: 4242)
    for url in (pg_url(), f"sqlite:///{store}"):
        result = CliRunner().invoke(cli, ["list"], env={"METASCHED_DB": url, "METASCHED_TENANT": None},
                                    prog_name="metasched")
        assert result.exit_code == 2, result.output
        assert result.stderr.startswith("metasched: error: local mode (--db) is for root on the server host;")
        assert result.stderr.count("\n") == 1
    result = CliRunner().invoke(msbatch, ["--db", f"sqlite:///{store}", str(_script(tmp_path, "-A t"))])
    assert result.exit_code == 2 and "local mode (--db) is for root" in result.stderr
    os.chown(store, 4242, -1)  # the owner of a SQLite file could open it anyway
    assert CliRunner().invoke(cli, ["list"], env={"METASCHED_DB": f"sqlite:///{store}"}).exit_code == 0


# --- a thin start-up --------------------------------------------------------------------------

_PROBE = textwrap.dedent(
    """
    import atexit, json, os, sys
    def _dump():
        with open(os.environ["PROBE_OUT"], "w") as out:
            json.dump(sorted(sys.modules), out)
    atexit.register(_dump)
    if sys.argv[1] == "msbatch":
        from cli.sbatch.msbatch import main
        sys.argv = sys.argv[1:]
        main()
    else:
        from cli.main import main
        sys.argv = ["metasched", *sys.argv[1:]]
        main()
    """
)


def _modules_after(argv: list[str], env: dict[str, str], out: Path) -> tuple[subprocess.CompletedProcess, list[str]]:
    """_modules_after runs the CLI in a fresh interpreter and lists every module it had imported when it exited."""
    done = subprocess.run([sys.executable, "-c", _PROBE, *argv], cwd=REPO, capture_output=True, text=True,
                          timeout=60, env={**os.environ, **env, "PROBE_OUT": str(out)})
    return done, json.loads(out.read_text())


def test_the_api_path_imports_no_store_models_or_web_framework(sqlite_api: tuple[RunningApi, Service],
                                                                 tmp_path: Path) -> None:
    api, service = sqlite_api
    ok(runner(api.address, tmp_path)("submit", "-f", TRAIN))
    env = {"METASCHED_API": api.address, "METASCHED_CREDENTIAL_FILE": credential(tmp_path, 0)}
    env.update({name: "" for name in ("METASCHED_DB", "METASCHED_DB_FILE", "METASCHED_TENANT", "SBATCH_ACCOUNT")})
    script = _script(tmp_path, "-A tenant-a")
    cases = [["--version"], ["--help"], ["list"], ["list", "--json"], ["status", service.list_jobs()[0].short_id],
             ["msbatch", "--parsable", str(script)]]
    for argv in cases:
        done, modules = _modules_after(argv, env, tmp_path / "modules.json")
        assert done.returncode == 0, (argv, done.stderr)
        heavy = [m for m in modules if any(m == h or m.startswith(h + ".") for h in HEAVY)]
        assert heavy == [], (argv, heavy)
    assert len(service.list_jobs()) == 2  # msbatch did submit


def test_local_mode_still_loads_the_store_on_demand(tmp_path: Path) -> None:
    env = {"METASCHED_DB": f"sqlite:///{tmp_path / 's.sqlite'}", "METASCHED_TENANT": "", "METASCHED_DB_FILE": ""}
    done, modules = _modules_after(["list"], env, tmp_path / "modules.json")
    assert done.returncode == 0, done.stderr
    # local mode speaks the API too: the service's app runs in process (cli.local)
    assert "sqlalchemy" in modules and "fastapi" in modules


def test_lazy_commands_show_their_own_help() -> None:
    for name, (_, _, short) in LAZY.items():
        command = cli.get_command(None, name)  # type: ignore[arg-type]
        assert command is not None and command.get_short_help_str(200) == short, name
