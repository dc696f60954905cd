"""The ``metasched`` command end to end: submit, status, list, cancel, retry, tenants, db upgrade.

Every command runs through click's CliRunner against a real store: a SQLite file per test, and
the same flow against PostgreSQL (the ``pg_service`` fixture empties it first).
"""

from __future__ import annotations

import gc
import json
import re
import uuid
from collections.abc import Callable
from pathlib import Path
from typing import Any

import pytest
from click.testing import CliRunner, Result

from cli.main import cli
from meta.model.kinds import PriorityClass
from tests.conftest import pg_url

EXAMPLES = Path(__file__).resolve().parents[2] / "examples"
TRAIN, INFER, EVAL = EXAMPLES / "train.yaml", EXAMPLES / "infer.yaml", EXAMPLES / "eval.yaml"
SHORT_ID = re.compile(r"^j[0-9a-z]{8}$")

Run = Callable[..., Result]


def make_runner(db_url: str | None) -> Run:
    """make_runner returns ``run(*args, tenant=None)`` that invokes the CLI and checks its hygiene."""

    def run(*args: str, tenant: str | None = None) -> Result:
        env: dict[str, str | None] = {
            "METASCHED_DB": db_url,
            "METASCHED_TENANT": tenant,
            "METASCHED_DEBUG": None,
        }
        result = CliRunner().invoke(cli, [str(a) for a in args], env=env, prog_name="metasched")
        gc.collect()  # every invocation opens its own engine: close their pools now, not later
        assert "Traceback" not in result.output, result.output
        if result.exception is not None:
            assert isinstance(result.exception, SystemExit), repr(result.exception)
        return result

    return run


def ok(result: Result) -> str:
    assert result.exit_code == 0, result.output
    return result.stdout


def as_json(result: Result) -> Any:
    return json.loads(ok(result))


def job_ids(run: Run, *args: str, tenant: str | None = None) -> list[str]:
    return [job["short_id"] for job in as_json(run("list", "--json", *args, tenant=tenant))]


def write(path: Path, text: str) -> Path:
    path.write_text(text, encoding="utf-8")
    return path


@pytest.fixture
def sqlite_url(tmp_path: Path) -> str:
    return f"sqlite:///{tmp_path}/x.sqlite"


@pytest.fixture(params=["sqlite", pytest.param("postgres", marks=pytest.mark.postgres)])
def db_url(request: pytest.FixtureRequest, sqlite_url: str) -> str:
    """db_url is an empty store on each backend."""
    if request.param == "sqlite":
        return sqlite_url
    request.getfixturevalue("pg_service")  # truncates the PostgreSQL test database
    return pg_url()


@pytest.fixture
def run(db_url: str) -> Run:
    return make_runner(db_url)


@pytest.fixture
def run_sqlite(sqlite_url: str) -> Run:
    return make_runner(sqlite_url)


# --- the job flow, on SQLite and on PostgreSQL ------------------------------------------------


class TestJobFlow:
    """TestJobFlow runs each user-visible flow against both backends."""

    @pytest.mark.parametrize("path", [TRAIN, INFER, EVAL], ids=lambda p: p.name)
    def test_submit_each_example_prints_a_job_id(self, run: Run, path: Path) -> None:
        result = run("submit", "-f", path)
        short_id = ok(result).strip()
        assert SHORT_ID.match(short_id), result.output
        assert result.stderr == ""
        assert job_ids(run) == [short_id]

    def test_submit_json(self, run: Run) -> None:
        data = as_json(run("submit", "-f", INFER, "--json"))
        uuid.UUID(data["id"])
        assert SHORT_ID.match(data["short_id"])
        assert data["created"] is True
        assert (data["name"], data["tenant"], data["kind"]) == ("embed-corpus", "tenant-b", "inference")
        assert data["priority_class"] == PriorityClass.DEADLINE_INFERENCE.value
        assert data["state"] == "pending"
        assert data["tasks"] == {"pending": 4}
        assert job_ids(run) == [data["short_id"]]

    def test_same_key_twice_returns_the_same_job(self, run: Run) -> None:
        first = as_json(run("submit", "-f", TRAIN, "--key", "k-1", "--json"))
        second = as_json(run("submit", "-f", TRAIN, "--key", "k-1", "--json"))
        assert second["id"] == first["id"]
        assert (first["created"], second["created"]) == (True, False)
        plain = ok(run("submit", "-f", TRAIN, "--key", "k-1")).strip()
        assert plain == first["short_id"]
        assert job_ids(run) == [first["short_id"]]

    def test_without_key_each_submit_is_a_new_job(self, run: Run) -> None:
        first = ok(run("submit", "-f", EVAL)).strip()
        second = ok(run("submit", "-f", EVAL)).strip()
        assert first != second
        assert sorted(job_ids(run)) == sorted([first, second])

    def test_same_key_with_changed_spec_is_refused(self, run: Run, tmp_path: Path) -> None:
        first = ok(run("submit", "-f", TRAIN, "--key", "k-1")).strip()
        changed = write(tmp_path / "changed.yaml", TRAIN.read_text().replace("workers: 2", "workers: 3"))
        result = run("submit", "-f", changed, "--key", "k-1")
        assert result.exit_code == 1
        assert "different spec" in result.stderr
        assert first in result.stderr
        assert result.stdout == ""
        assert job_ids(run) == [first]

    def test_keys_are_scoped_per_tenant(self, run: Run) -> None:
        a = ok(run("submit", "-f", TRAIN, "--key", "shared")).strip()  # tenant-a
        b = ok(run("submit", "-f", INFER, "--key", "shared")).strip()  # tenant-b
        assert a != b
        assert sorted(job_ids(run)) == sorted([a, b])

    @pytest.mark.parametrize(
        ("text", "field"),
        [
            (TRAIN.read_text().replace("memory: 128Gi", "memory: 128Qi"), "resources.memory"),
            (INFER.read_text() + "workers: 2\n", "workers"),
            (TRAIN.read_text() + "partitions: 4\n", "partitions"),
            (TRAIN.read_text().replace("kind: training\n", ""), "kind"),
            (TRAIN.read_text().replace("kind: training", "kind: pretraining"), "kind"),
            (
                TRAIN.read_text().replace("[node_failure, preempted, lost]", "[node_failure, gremlins]"),
                "retry.on[1]",
            ),
            (EVAL.read_text().replace("time_limit: 1h", "time_limit: forever"), "time_limit"),
            (TRAIN.read_text().replace("[WANDB_API_KEY]", "[WANDB_API_KEY=abc123]"), "secrets"),
            (TRAIN.read_text().replace("NCCL_DEBUG: WARN", "METASCHED_RANK: '0'"), "env"),
        ],
        ids=[
            "memory",
            "workers",
            "partitions",
            "no-kind",
            "bad-kind",
            "retry-on",
            "time-limit",
            "secret",
            "env",
        ],
    )
    def test_invalid_job_file_names_the_field_and_writes_nothing(
        self, run: Run, tmp_path: Path, text: str, field: str
    ) -> None:
        result = run("submit", "-f", write(tmp_path / "bad.yaml", text), "--key", "k-1")
        assert result.exit_code == 2, result.output
        assert "invalid job spec" in result.stderr
        assert re.search(rf"(spec: |; ){re.escape(field)}: ", result.stderr), result.stderr
        assert result.stderr.count("\n") == 1  # one line, however many problems
        assert result.stdout == ""
        assert "abc123" not in result.output  # a secret value is never echoed back
        assert as_json(run("list", "--json")) == []
        # the key was not used up by the failed submit
        assert SHORT_ID.match(ok(run("submit", "-f", TRAIN, "--key", "k-1")).strip())

    def test_missing_job_file(self, run: Run, tmp_path: Path) -> None:
        result = run("submit", "-f", tmp_path / "nope.yaml")
        assert result.exit_code == 2
        assert "nope.yaml" in result.stderr and "cannot read" in result.stderr
        assert as_json(run("list", "--json")) == []

    def test_malformed_yaml(self, run: Run, tmp_path: Path) -> None:
        result = run("submit", "-f", write(tmp_path / "bad.yaml", "kind: [training\n"))
        assert result.exit_code == 2
        assert "not valid YAML or JSON" in result.stderr
        assert as_json(run("list", "--json")) == []

    def test_json_job_file(self, run: Run, tmp_path: Path) -> None:
        job = {
            "kind": "inference",
            "name": "from-json",
            "tenant": "tenant-c",
            "partitions": 2,
            "output": "/out",
            "resources": {"cpus": 1},
            "command": "echo hi",
        }
        short_id = ok(run("submit", "-f", write(tmp_path / "job.json", json.dumps(job)))).strip()
        status = as_json(run("status", short_id, "--json"))
        assert [t["name"] for t in status["task_list"]] == ["0", "1"]
        assert status["priority_class"] == "inference"

    def test_status_table(self, run: Run) -> None:
        short_id = ok(run("submit", "-f", INFER)).strip()
        out = ok(run("status", short_id))
        assert out.startswith(f"job {short_id} (")
        assert "name embed-corpus" in out and "kind inference" in out and "tenant tenant-b" in out
        assert f"class {PriorityClass.DEADLINE_INFERENCE.value}" in out
        assert "state pending" in out and "tasks: 4 pending" in out
        lines = out.splitlines()
        header = next(line for line in lines if line.startswith("TASK"))
        assert header.split() == [
            "TASK",
            "NAME",
            "STATE",
            "ATTEMPTS",
            "LAST",
            "TOKEN",
            "SLURM",
            "NODES",
            "EXIT",
            "REASON",
        ]
        rows = [line.split() for line in lines[lines.index(header) + 1 :] if line.strip()]
        assert [row[:4] for row in rows] == [[str(i), f"shard-00{i}", "pending", "0"] for i in range(4)]

    def test_status_json(self, run: Run) -> None:
        submitted = as_json(run("submit", "-f", TRAIN, "--json"))
        for ref in (submitted["short_id"], submitted["id"]):  # short id or UUID
            status = as_json(run("status", ref, "--json"))
            assert status["id"] == submitted["id"]
            assert status["state"] == "pending"
            assert status["cancel_requested"] is False
            assert status["spec"]["workers"] == 2
            assert status["spec"]["resources"]["gpu_type"] == "a100"
            assert status["spec"]["secrets"] == ["WANDB_API_KEY"]
            (task,) = status["task_list"]
            assert (task["index"], task["name"], task["state"], task["reason"]) == (
                0,
                "0",
                "pending",
                "submitted",
            )
            assert task["attempts"] == []
            assert isinstance(status["recent_transitions"], list)

    def test_list_filters_by_tenant_and_state(self, run: Run) -> None:
        train = ok(run("submit", "-f", TRAIN)).strip()  # tenant-a
        infer = ok(run("submit", "-f", INFER)).strip()  # tenant-b
        evaluation = ok(run("submit", "-f", EVAL)).strip()  # tenant-a
        assert sorted(job_ids(run)) == sorted([train, infer, evaluation])
        assert sorted(job_ids(run, "--tenant", "tenant-a")) == sorted([train, evaluation])
        assert job_ids(run, "--tenant", "tenant-b") == [infer]
        assert job_ids(run, "--tenant", "tenant-zzz") == []
        assert sorted(job_ids(run, "--state", "pending")) == sorted([train, infer, evaluation])
        ok(run("cancel", evaluation))
        assert job_ids(run, "--state", "cancelled") == [evaluation]
        assert sorted(job_ids(run, "--state", "pending")) == sorted([train, infer])
        assert job_ids(run, "--tenant", "tenant-a", "--state", "pending") == [train]
        assert job_ids(run, "--tenant", "tenant-b", "--state", "cancelled") == []
        assert job_ids(run, "--state", "running") == []

    def test_list_table(self, run: Run) -> None:
        assert ok(run("list")).strip() == "(none)"
        short_id = ok(run("submit", "-f", INFER)).strip()
        lines = ok(run("list")).splitlines()
        assert lines[0].split() == [
            "JOB", "NAME", "TENANT", "KIND", "STATE", "TASKS", "TIME_LIMIT", "NODES", "SLURM", "REASON", "SUBMITTED",
        ]  # fmt: skip
        assert lines[1].split()[:7] == [
            short_id,
            "embed-corpus",
            "tenant-b",
            "inference",
            "pending",
            "4",
            "pending",
        ]

    def test_list_rejects_unknown_state(self, run: Run) -> None:
        result = run("list", "--state", "sleeping")
        assert result.exit_code == 2
        assert "sleeping" in result.output

    def test_cancel_is_idempotent(self, run: Run) -> None:
        short_id = ok(run("submit", "-f", INFER)).strip()
        assert ok(run("cancel", short_id)).strip() == f"job {short_id}: cancelled"
        assert ok(run("cancel", short_id)).strip() == f"job {short_id}: cancelled"
        status = as_json(run("status", short_id, "--json"))
        assert status["state"] == "cancelled"
        assert status["cancel_requested"] is True
        assert {t["state"] for t in status["task_list"]} == {"cancelled"}
        moves = [(t["entity"], t["from_state"], t["to_state"]) for t in status["recent_transitions"]]
        assert moves.count(("task", "pending", "cancelled")) == 4  # once per task, not per cancel

    def test_cancel_json(self, run: Run) -> None:
        short_id = ok(run("submit", "-f", EVAL)).strip()
        status = as_json(run("cancel", short_id, "--json"))
        assert status["short_id"] == short_id
        assert status["state"] == "cancelled"

    def test_retry_after_cancel_requeues(self, run: Run) -> None:
        short_id = ok(run("submit", "-f", INFER)).strip()
        ok(run("cancel", short_id))
        out = ok(run("retry", short_id))
        assert out.startswith("retrying 4 task(s): 0:shard-000, 1:shard-001")
        status = as_json(run("status", short_id, "--json"))
        assert status["state"] == "pending"
        assert status["cancel_requested"] is False
        assert {t["state"] for t in status["task_list"]} == {"pending"}
        assert job_ids(run, "--state", "pending") == [short_id]

    def test_cancel_and_retry_cycles(self, run: Run) -> None:
        short_id = ok(run("submit", "-f", EVAL)).strip()
        for _ in range(3):  # each cycle is a new intent: new stimulus ids, no clash with the last one
            assert ok(run("cancel", short_id)).strip() == f"job {short_id}: cancelled"
            assert ok(run("retry", short_id)).strip() == "retrying 1 task(s): 0:0"
        status = as_json(run("status", short_id, "--json"))
        assert status["state"] == "pending" and status["cancel_requested"] is False
        moves = [
            (t["from_state"], t["to_state"]) for t in status["recent_transitions"] if t["entity"] == "task"
        ]
        assert moves.count(("pending", "cancelled")) == 3
        assert moves.count(("cancelled", "pending")) == 3

    def test_retry_one_task(self, run: Run) -> None:
        short_id = ok(run("submit", "-f", INFER)).strip()
        ok(run("cancel", short_id))
        (task,) = as_json(run("retry", f"{short_id}/2", "--json"))
        assert (task["index"], task["name"], task["state"]) == (2, "shard-002", "pending")
        states = [t["state"] for t in as_json(run("status", short_id, "--json"))["task_list"]]
        assert states == ["cancelled", "cancelled", "pending", "cancelled"]

    def test_retry_of_a_pending_job_is_refused(self, run: Run) -> None:
        short_id = ok(run("submit", "-f", EVAL)).strip()
        result = run("retry", short_id)
        assert result.exit_code == 2
        assert "nothing to retry" in result.stderr
        ok(run("cancel", short_id))
        ok(run("retry", short_id))
        result = run("retry", short_id)  # already pending again
        assert result.exit_code == 2
        assert as_json(run("status", short_id, "--json"))["state"] == "pending"

    @pytest.mark.parametrize("command", ["status", "cancel", "retry"])
    def test_unknown_job_is_not_found(self, run: Run, command: str) -> None:
        ok(run("submit", "-f", EVAL))
        for ref in ("jzzzzzzzz", str(uuid.uuid4())):
            result = run(command, ref)
            assert result.exit_code == 1, result.output
            assert "not found" in result.stderr
            assert result.stdout == ""

    def test_tenants_cannot_see_or_touch_each_other(self, run: Run) -> None:
        job = as_json(run("submit", "-f", TRAIN, "--json"))  # tenant-a
        for ref in (job["short_id"], job["id"]):
            for command in (("status", ref), ("status", ref, "--json"), ("cancel", ref), ("retry", ref)):
                result = run(*command, tenant="tenant-b")
                assert result.exit_code == 1, (command, result.output)
                assert "not found" in result.stderr
                assert "tenant-a" not in result.output  # existence does not leak
        result = run("--tenant", "tenant-b", "cancel", job["short_id"])  # the option, not the env
        assert result.exit_code == 1 and "not found" in result.stderr
        assert job_ids(run, tenant="tenant-b") == []
        assert job_ids(run, "--tenant", "tenant-a", tenant="tenant-b") == []
        assert ok(run("list", tenant="tenant-b")).strip() == "(none)"
        # tenant-a's job is untouched and visible to tenant-a
        assert job_ids(run, tenant="tenant-a") == [job["short_id"]]
        assert as_json(run("status", job["short_id"], "--json", tenant="tenant-a"))["state"] == "pending"

    def test_tenant_cannot_submit_for_another(self, run: Run) -> None:
        result = run("submit", "-f", TRAIN, tenant="tenant-b")  # train.yaml is tenant-a's
        assert result.exit_code == 2
        assert "tenant-b" in result.stderr
        assert as_json(run("list", "--json")) == []
        assert SHORT_ID.match(ok(run("submit", "-f", TRAIN, tenant="tenant-a")).strip())

    def test_db_upgrade_twice(self, run: Run) -> None:
        first = as_json(run("db", "upgrade", "--json"))
        second = as_json(run("db", "upgrade", "--json"))
        assert first["to"] == second["to"] and second["from"] == second["to"]
        assert ok(run("db", "upgrade")).rstrip().endswith(f"-> {second['to']}")
        assert f"at {second['to']}, head {second['to']}" in ok(run("db", "current"))
        assert "metasched:metasched@" not in json.dumps(first)  # the password is redacted


# --- SQLite-only checks -----------------------------------------------------------------------


def test_db_upgrade_creates_a_fresh_database(tmp_path: Path) -> None:
    run = make_runner(f"sqlite:///{tmp_path}/new/dir/fresh.sqlite")
    first = as_json(run("db", "upgrade", "--json"))
    assert first["from"] is None and first["to"]
    assert (tmp_path / "new" / "dir" / "fresh.sqlite").exists()
    second = as_json(run("db", "upgrade", "--json"))
    assert second["from"] == second["to"] == first["to"]


@pytest.mark.parametrize("url", ["bogus://x", "not a url", "mysql://u:p@localhost/db", "://"])
@pytest.mark.parametrize(
    "command", [("list",), ("status", "jzzzzzzzz"), ("db", "upgrade"), ("submit", "-f", EVAL)]
)
def test_bad_db_url_is_a_usage_error(url: str, command: tuple[str, ...]) -> None:
    result = make_runner(url)(*command)
    assert result.exit_code == 2, result.output
    assert "error:" in result.stderr
    assert result.stdout == ""


def test_bad_db_option_overrides_environment(sqlite_url: str) -> None:
    result = make_runner(sqlite_url)("--db", "bogus://x", "list")
    assert result.exit_code == 2
    assert "unsupported database" in result.stderr


def test_unreachable_database_is_an_error_not_a_traceback() -> None:
    result = make_runner("postgresql+psycopg://nobody:secret@127.0.0.1:1/nothing")("list")
    assert result.exit_code == 1
    assert "cannot use the database" in result.stderr
    assert "secret" not in result.output


def test_help_needs_no_database() -> None:
    run = make_runner("bogus://x")
    for args in (("--help",), ("submit", "--help"), ("db", "--help")):
        assert "Usage:" in ok(run(*args))


def test_submit_requires_a_file(run_sqlite: Run) -> None:
    result = run_sqlite("submit")
    assert result.exit_code == 2
    assert "--file" in result.output


def test_empty_idempotency_key_is_refused(run_sqlite: Run) -> None:
    result = run_sqlite("submit", "-f", EVAL, "--key", "")
    assert result.exit_code == 2
    assert "idempotency key" in result.stderr
    assert as_json(run_sqlite("list", "--json")) == []


def test_malformed_task_reference(run_sqlite: Run) -> None:
    short_id = ok(run_sqlite("submit", "-f", EVAL)).strip()
    ok(run_sqlite("cancel", short_id))
    result = run_sqlite("retry", f"{short_id}/first")
    assert result.exit_code == 2 and f"{short_id}/0" in result.stderr
    result = run_sqlite("retry", f"{short_id}/7")
    assert result.exit_code == 1 and "not found" in result.stderr


@pytest.mark.parametrize(
    ("text", "field"),
    [
        (EVAL.read_text().replace("kind: evaluation", "kind: [evaluation]"), "kind"),
        (EVAL.read_text().replace("memory: 32Gi", "memory: .inf"), "resources.memory"),
    ],
    ids=["list-kind", "infinite-memory"],
)
def test_job_files_that_break_validation_are_usage_errors(
    run_sqlite: Run, tmp_path: Path, text: str, field: str
) -> None:
    result = run_sqlite("submit", "-f", write(tmp_path / "bad.yaml", text))
    assert result.exit_code == 2, result.output
    assert f"invalid job spec: {field}: " in result.stderr and result.stderr.count("\n") == 1


def test_serve_refuses_a_bad_policy_file_before_touching_anything(run_sqlite: Run, tmp_path: Path) -> None:
    policy = tmp_path / "policy.yaml"
    policy.write_text("max_held_reservations: lots\n")
    result = run_sqlite("serve", "--once", "--policy-config", policy)
    assert result.exit_code == 2
    assert "bad --policy-config" in result.output and "max_held_reservations" in result.output
