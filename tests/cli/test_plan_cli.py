"""``metasched plan history`` and ``plan calibrate`` through click's CliRunner on a SQLite store, then ``metasched simulate`` on its file."""

from __future__ import annotations

import csv
import io
import json
from collections.abc import Iterator
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from meta.model.durations import utcnow
from meta.model.nodes import NodeState
from meta.model.resources import ResourceVector
from meta.model.states import AttemptState
from meta.service.api import Service
from meta.sim.trace import load_trace
from meta.store.db import Database
from meta.store.inventory import save_inventory
from meta.store.lifecycle import attempt_event, create_attempt
from meta.store.models import CycleRecord, Job
from tests.conftest import sqlite_database
from tests.plan_support import assert_usage_error, run
from tests.runtime.support import evaluation, share, submit, training

CLOCKED = ("meta.service.api", "meta.store.lifecycle", "meta.store.transitions", "meta.store.audit")
LAUNCH, RUN, OK = AttemptState.LAUNCHING, AttemptState.RUNNING, AttemptState.SUCCEEDED
ONE_GPU = {"cpus": 2, "memory": "8G", "gpus": 1, "gpu_type": "a100"}
CLUSTER = """
name: site
node_groups:
  - {name: a100, count: 2, gpus: 8, gpu_type: a100}
"""


@pytest.fixture
def base() -> datetime:
    """base is a day ago (whole seconds): the jobs' times, inside ``--since 14d``."""
    return (utcnow() - timedelta(days=1)).replace(microsecond=0)


@pytest.fixture
def store(tmp_path: Path, base: datetime, monkeypatch: pytest.MonkeyPatch) -> Iterator[tuple[str, dict[str, str]]]:
    """store is a SQLite file with four jobs written on a test clock; yields its URL and each job's short id."""
    now = [base]
    for module in CLOCKED:
        monkeypatch.setattr(f"{module}.utcnow", lambda: now[0])
    db = sqlite_database(tmp_path / "store.sqlite")
    service = Service(db)

    def at(seconds: float) -> None:
        now[0] = base + timedelta(seconds=seconds)

    def job(label: str, when: float, spec: Any, path: list[tuple[AttemptState, float]]) -> str:
        at(when)
        job_id, (task,) = submit(service, spec)
        if path:
            _attempt(db, task, when + 10, path, at)
        with db.session() as session:
            row = session.get(Job, job_id)
            assert row is not None
            return row.short_id

    ids = {
        "one": job("one", 100, evaluation("one", "acme", resources=ONE_GPU), [(LAUNCH, 115), (RUN, 120), (OK, 720)]),
        "two": job("two", 200, training("two", "acme", workers=2), [(LAUNCH, 215), (RUN, 260), (OK, 1260)]),
        "other": job("other", 300, evaluation("other", "beta", resources=ONE_GPU), [(LAUNCH, 315), (RUN, 330)]),
        "waiting": job("waiting", 400, evaluation("waiting", "beta", resources=ONE_GPU), []),
    }
    db.dispose()
    monkeypatch.undo()  # the command runs on the real clock: "now" is after every time above
    yield f"sqlite:///{tmp_path / 'store.sqlite'}", ids


def _attempt(db: Database, task_id: str, created: float, path: list[tuple[AttemptState, float]], at: Any) -> None:
    with db.session() as session:
        at(created)
        attempt_id = create_attempt(session, task_id, f"t:{task_id}", placement=[share("n1")]).id
    for i, (state, when) in enumerate(path):
        with db.session() as session:
            at(when)
            attempt_event(session, attempt_id, state, f"t:{attempt_id}:{i}", actor="test")


def test_history_writes_the_csv_to_stdout_and_the_summary_to_stderr(store: tuple[str, dict[str, str]], base: datetime) -> None:
    url, ids = store
    result = run(url, "plan", "history", "--since", "14d")
    assert result.exit_code == 0, result.output
    rows = {row["job_id"]: row for row in csv.DictReader(io.StringIO(result.stdout))}
    assert set(rows) == {ids["one"], ids["two"], ids["other"]}  # "waiting" never started
    since = utcnow() - timedelta(days=14)  # the command's own "14d ago" is a moment earlier than this
    offset = (base - since).total_seconds()
    assert abs(float(rows[ids["one"]]["submit_time"]) - (offset + 100)) < 60
    assert (rows[ids["one"]]["duration_s"], rows[ids["one"]]["outcome"], rows[ids["one"]]["censored"]) == ("600", "succeeded", "0")
    assert (rows[ids["two"]]["num_gpus"], rows[ids["two"]]["workers"], rows[ids["two"]]["gpus_per_worker"]) == ("4", "2", "2")
    assert (rows[ids["other"]]["outcome"], rows[ids["other"]]["censored"]) == ("running", "1")
    assert "3 rows (1 censored" in result.stderr and "never started: 1" in result.stderr


def test_history_to_a_file_with_json_and_simulate_replays_it(store: tuple[str, dict[str, str]], base: datetime,
                                                              tmp_path: Path) -> None:
    url, ids = store
    out = tmp_path / "trace.csv"
    since = (base - timedelta(hours=1)).isoformat()
    result = run(url, "plan", "history", "--since", since, "-o", str(out), "--json")
    assert result.exit_code == 0, result.output
    summary = json.loads(result.stdout)
    assert (summary["rows"], summary["censored"], summary["skipped_never_started"], summary["jobs"]) == (3, 1, 1, 4)
    assert summary["path"] == str(out) and summary["window"]["since"] == datetime.fromisoformat(since).isoformat()
    assert "censored" in summary["rules"]
    jobs, _ = load_trace(out)
    assert {job.job_id: job.submit_time for job in jobs} == {ids["one"]: 3700.0, ids["two"]: 3800.0, ids["other"]: 3900.0}
    cluster = tmp_path / "site.yaml"
    cluster.write_text(CLUSTER)
    simulated = run(None, "simulate", "--trace", str(out), "--cluster", str(cluster), "--policy", "fifo",
                    "--warmup-hours", "0", "--json")
    assert simulated.exit_code == 0, simulated.output
    counts = json.loads(simulated.stdout)["runs"][0]["metrics"]["jobs"]
    assert (counts["total"], counts["rejected"], counts["unfinished"]) == (3, 0, 0)


def test_anonymize_hides_tenants_and_names_and_keeps_equal_tenants_equal(store: tuple[str, dict[str, str]],
                                                                          tmp_path: Path) -> None:
    url, ids = store
    out = tmp_path / "shared.csv"
    result = run(url, "plan", "history", "--since", "2d", "-o", str(out), "--anonymize")
    assert result.exit_code == 0, result.output
    text = out.read_text()
    for secret in ("acme", "beta", "one", "two", "other", *ids.values()):
        assert f",{secret}," not in text and f"{secret}_" not in text, secret
    rows = list(csv.DictReader(io.StringIO(text)))
    by_duration = {row["duration_s"]: row for row in rows}
    acme = {by_duration["600"]["tenant"], by_duration["1000"]["tenant"]}
    assert len(acme) == 1 and rows[0]["tenant"] != ""
    beta = next(row["tenant"] for row in rows if row["censored"] == "1")
    assert beta not in acme


@pytest.mark.parametrize(
    "args",
    [["--since", "400d"], ["--since", "yesterday"], ["--since", "1d", "--until", "2d"], ["--since", "14d", "--json"]],
)
def test_bad_input_is_one_line_and_exit_2(store: tuple[str, dict[str, str]], args: list[str]) -> None:
    url, _ = store
    result = run(url, "plan", "history", *args)
    assert result.exit_code == 2, result.output
    lines = result.stderr.strip().splitlines()
    assert len(lines) == 1 and lines[0].startswith("metasched: error: "), result.stderr
    assert result.stdout == ""


def test_a_missing_store_is_refused_and_not_created(tmp_path: Path) -> None:
    path = tmp_path / "none.sqlite"
    result = run(f"sqlite:///{path}", "plan", "history", "--since", "14d")
    assert result.exit_code == 2 and "no store at" in result.stderr, result.output
    assert not path.exists()


def test_plan_is_listed_in_help_without_importing_it() -> None:
    result = run(None, "--help")
    assert result.exit_code == 0 and "plan" in result.stdout
    assert run(None, "plan", "history", "--help").exit_code == 0


def test_a_window_by_iso_dates(store: tuple[str, dict[str, str]], base: datetime) -> None:
    url, ids = store
    until = (base + timedelta(seconds=250)).astimezone(UTC).strftime("%Y-%m-%dT%H:%M:%SZ")
    result = run(url, "plan", "history", "--since", base.isoformat(), "--until", until)
    assert result.exit_code == 0, result.output
    rows = {row["job_id"]: row for row in csv.DictReader(io.StringIO(result.stdout))}
    # jobs submitted before 250 s; at that cut "two" had not started (260 s), "one" had ended
    assert set(rows) == {ids["one"]} and rows[ids["one"]]["submit_time"] == "100"


# --- plan calibrate ------------------------------------------------------------------------------------------------


def _cluster_file(tmp_path: Path) -> str:
    path = tmp_path / "site.yaml"
    path.write_text(CLUSTER)
    return str(path)


def test_calibrate_replays_the_window_beside_the_recorded_delays(store: tuple[str, dict[str, str]], tmp_path: Path) -> None:
    url, _ = store
    result = run(url, "plan", "calibrate", "--since", "14d", "--cluster", _cluster_file(tmp_path), "--min-jobs", "1",
                 "--json")
    assert result.exit_code == 0, result.output
    data = json.loads(result.stdout)
    assert (data["rows"], data["replayed"], data["censored"], data["unplaced"], data["jobs"]) == (3, 3, 1, 0, 4)
    tenants = {fit["tenant"]: fit for fit in data["tenants"]}
    # recorded: one waited 20 s, two 60 s (acme), other 30 s (beta); 16 free GPUs place each at the next 2 s tick,
    # and each starts the window's measured launch later: the median of 10, 50 and 20 s (created → RUNNING)
    acme, beta = tenants["acme"], tenants["beta"]
    assert (acme["jobs"], acme["mean_queue_s"]["real"], acme["p95_queue_s"]["real"]) == (2, 40, 58)
    assert beta["jobs"] == 1 and beta["mean_queue_s"]["real"] == 30
    assert data["launch_delay"] == {"simulated_s": 20, "measured_s": 20, "measured_attempts": 3}
    for fit in (acme, beta):
        figure = fit["mean_queue_s"]
        assert 20 <= figure["sim"] < 22.5
        assert figure["error"] == pytest.approx((figure["sim"] - figure["real"]) / figure["real"], abs=1e-3)
    off = run(url, "plan", "calibrate", "--since", "14d", "--cluster", _cluster_file(tmp_path), "--min-jobs", "1",
              "--json", "--launch-delay", "0")
    assert all(fit["mean_queue_s"]["sim"] < 2.5 for fit in json.loads(off.stdout)["tenants"])  # starts at its decision
    assert data["cluster"].startswith(f"{tmp_path / 'site.yaml'} (2 nodes, 16 GPUs")
    assert data["policy"] == "shipped defaults" and data["period_s"] == 2.0
    assert data["verdict"].startswith("simulated mean queue delay within ") and "every tenant" in data["verdict"]
    assert any("1 rows had not ended at the cut" in note for note in data["notes"])


def test_calibrate_prints_a_table_on_the_stored_inventory_cut_at_the_last_cycle(
        store: tuple[str, dict[str, str]], base: datetime) -> None:
    url, _ = store
    database = Database(url)
    nodes = [NodeState(name=f"a{i}", capacity=ResourceVector(cpus=32, memory_mib=256000, gpus=8, gpu_type="a100"),
                       switch="leaf1") for i in range(2)]
    with database.session() as session:
        save_inventory(session, nodes, 1, {"leaf1": "spine"})
        session.add(CycleRecord(epoch=1, inventory_version=1, at=base + timedelta(seconds=400), pending=0, placed=0,
                                preempted=0, duration_s=0.01, fragmentation={}, held=[]))
    database.dispose()
    result = run(url, "plan", "calibrate", "--since", "14d", "--min-jobs", "2")
    assert result.exit_code == 0, result.output
    lines = result.stdout.splitlines()
    # at the last cycle (400 s) none of the three had ended: all censored, and the daemon's stop is said
    assert lines[0].startswith("3 rows (3 censored) of 4 jobs submitted ")
    assert "cluster: stored inventory (2 nodes, 16 GPUs, saved " in lines[0] and "policy: shipped defaults" in lines[0]
    assert lines[2].split() == ["tenant", "jobs", "real", "mean", "sim", "mean", "error",
                                "real", "p95", "sim", "p95", "error"]
    assert lines[3].split()[:4] == ["acme", "2", "40.0", "s"] and lines[4].split()[:4] == ["overall", "3", "36.7", "s"]
    assert any(line.startswith("GPU utilization: recorded ") for line in lines)
    assert any(line.startswith("verdict: simulated mean queue delay within ") for line in lines)
    assert "replayed but not compared (fewer than 2 rows): beta (1)" in result.stdout
    assert "cut at the daemon's last cycle" in result.stdout


@pytest.mark.parametrize(
    ("args", "message"),
    [
        ([], "the store has no inventory (no daemon saved one): give --cluster PRESET|YAML|NxG"),
        (["--cluster", "nowhere.yaml"], "unknown cluster 'nowhere.yaml'"),
        (["--cluster", "2x8", "--period", "0"], "--period must be positive"),
        (["--cluster", "2x8", "--min-jobs", "0"], "--min-jobs at least 1"),
        (["--cluster", "2x8", "--policy-config", "missing.yaml"], "missing.yaml: cannot read"),
        (["--cluster", "2x8", "--until", "15d"], "must be after --since"),
    ],
)
def test_calibrate_bad_input_is_one_line_and_exit_2(store: tuple[str, dict[str, str]], args: list[str],
                                                    message: str) -> None:
    url, _ = store
    result = run(url, "plan", "calibrate", "--since", "14d", *args)
    assert_usage_error(result, message)


def test_calibrate_an_empty_window_is_refused(store: tuple[str, dict[str, str]], base: datetime) -> None:
    url, _ = store
    until = (base + timedelta(seconds=50)).isoformat()  # before the first job's submit
    result = run(url, "plan", "calibrate", "--since", "14d", "--until", until, "--cluster", "2x8")
    assert result.exit_code == 2 and "nothing to replay" in result.stderr, result.output
