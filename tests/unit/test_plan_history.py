"""``meta.plan.history``: the site's jobs become trace rows, field by field, on a SQLite store with a controlled clock.

Every write of the store (submit, attempts, transitions, audit) takes its time from one test
clock, so each job's timeline is chosen here and each row's values follow from it by the rules of
the module's docstring (eligibility, run time, censoring).
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from dataclasses import dataclass
from datetime import UTC, datetime, timedelta
from pathlib import Path
from typing import Any

import pytest

from meta.model.errors import InvalidRequest
from meta.model.kinds import FailureCategory
from meta.model.spec import AnySpec
from meta.model.states import AttemptState
from meta.plan.anonymize import anonymized
from meta.plan.history import HistoryExport, HistoryRow, history_rows
from meta.plan.trace_csv import COLUMNS, write_trace
from meta.plan.window import MAX_WINDOW_DAYS, parse_window
from meta.policy import fifo
from meta.service.api import Service
from meta.sim.cluster import ClusterSpec, load_cluster
from meta.sim.config import SimConfig
from meta.sim.engine import Engine
from meta.sim.job import JobState
from meta.sim.trace import load_trace
from meta.store.db import Database
from meta.store.lifecycle import attempt_event, create_attempt
from meta.store.models import Job
from tests.conftest import sqlite_database
from tests.runtime.support import evaluation, share, submit, training

T0 = datetime(2026, 3, 2, 8, 0, tzinfo=UTC)  # the window's start; every time below is T0 + seconds
CLOCKED = ("meta.service.api", "meta.store.lifecycle", "meta.store.transitions", "meta.store.audit")


class Clock:
    """Clock is the store's time in these tests: ``at(s)`` sets it to T0 + s."""

    def __init__(self) -> None:
        self.now = T0

    def at(self, seconds: float) -> datetime:
        """at moves the clock to T0 + ``seconds`` and returns it."""
        self.now = T0 + timedelta(seconds=seconds)
        return self.now


@pytest.fixture
def clock(monkeypatch: pytest.MonkeyPatch) -> Clock:
    found = Clock()
    for module in CLOCKED:
        monkeypatch.setattr(f"{module}.utcnow", lambda: found.now)
    return found


@pytest.fixture
def db(tmp_path: Path) -> Iterator[Database]:
    database = sqlite_database(tmp_path / "store.sqlite")
    yield database
    database.dispose()


@dataclass
class Site:
    """Site is the store, its clock and the ids of the jobs each test made."""

    db: Database
    service: Service
    clock: Clock
    jobs: dict[str, tuple[str, list[str]]]  # label -> (job id, task ids)

    def submit(self, label: str, at: float, spec: AnySpec) -> list[str]:
        """submit stores a job at T0 + ``at``; returns its task ids."""
        self.clock.at(at)
        self.jobs[label] = submit(self.service, spec)
        return self.jobs[label][1]

    def run(self, task_id: str, created: float, path: list[tuple[AttemptState, float]], **event: Any) -> None:
        """run makes one attempt at ``created`` and walks it through ``path`` (state, time); ``event`` goes to the last move."""
        with self.db.session() as session:
            self.clock.at(created)
            attempt = create_attempt(session, task_id, f"t:{task_id}:{created}", placement=[share("n1")])
            attempt_id = attempt.id
        for i, (state, at) in enumerate(path):
            with self.db.session() as session:
                self.clock.at(at)
                extra = event if i == len(path) - 1 else {}
                attempt_event(session, attempt_id, state, f"t:{attempt_id}:{i}", actor="test", **extra)

    def short(self, label: str) -> str:
        """short is a job's short id."""
        with self.db.session() as session:
            job = session.get(Job, self.jobs[label][0])
            assert job is not None
            return job.short_id

    def export(self, until: datetime | None = None, now: float = 5000) -> HistoryExport:
        """export reads the history from T0 with the clock's "now" at T0 + ``now``."""
        with self.db.session() as session:
            return history_rows(session, T0, until, now=T0 + timedelta(seconds=now))


LAUNCH, RUN, OK = AttemptState.LAUNCHING, AttemptState.RUNNING, AttemptState.SUCCEEDED
ONE_GPU = {"cpus": 2, "memory": "8G", "gpus": 1, "gpu_type": "a100"}


@pytest.fixture
def site(db: Database, clock: Clock) -> Site:
    """site is the store with the jobs of the brief: plain, retried, held, running, never started, gang, array."""
    s = Site(db, Service(db), clock, {})
    (plain,) = s.submit("plain", 100, evaluation("plain", "acme", resources=ONE_GPU))
    s.run(plain, 160, [(LAUNCH, 165), (RUN, 200), (OK, 1200)])
    (retried,) = s.submit("retried", 300, training("retried", "acme", time_limit="2h"))
    s.run(retried, 310, [(LAUNCH, 315), (RUN, 320), (AttemptState.FAILED, 920)],
          failure_category=FailureCategory.NODE_FAILURE)  # retried by the default policy
    s.run(retried, 1000, [(LAUNCH, 1050), (RUN, 1100), (OK, 1500)])
    (held,) = s.submit("held", 400, training("held", "beta", hold=True))
    clock.at(2000)
    s.service.release(s.jobs["held"][0])
    s.run(held, 2100, [(LAUNCH, 2110), (RUN, 2160), (OK, 2760)])
    (running,) = s.submit("running", 500, evaluation("running", "beta", resources=ONE_GPU))
    s.run(running, 600, [(LAUNCH, 650), (RUN, 700)])
    s.submit("waiting", 600, evaluation("waiting", "acme", resources=ONE_GPU))
    (launching,) = s.submit("launching", 650, evaluation("launching", "acme", resources=ONE_GPU))
    s.run(launching, 660, [(LAUNCH, 670)])  # sent to Slurm, never started
    gang_resources = {"cpus": 8, "memory": "32G", "gpus": 4, "gpu_type": "h100"}
    (gang,) = s.submit("gang", 700, training("gang", "acme", workers=2, resources=gang_resources))
    s.run(gang, 750, [(LAUNCH, 760), (RUN, 800), (OK, 1800)])
    array = s.submit("array", 800, evaluation("array", "beta", resources=ONE_GPU, array={"indexes": [0, 3, 5]}))
    s.run(array[0], 850, [(LAUNCH, 860), (RUN, 900), (OK, 1000)])
    s.run(array[1], 900, [(LAUNCH, 910), (RUN, 950), (OK, 1250)])  # element 5 never starts
    (preempted,) = s.submit("preempted", 900, training("preempted", "acme"))
    s.run(preempted, 950, [(LAUNCH, 960), (RUN, 1000), (AttemptState.PREEMPTED, 1300)])  # requeued, waits at the cut
    return s


def _by_id(export: HistoryExport) -> dict[str, HistoryRow]:
    return {row.job_id: row for row in export.rows}


def _expect(row: HistoryRow, **fields: Any) -> None:
    got = {name: getattr(row, name) for name in fields}
    assert got == fields, row


def test_a_plain_succeeded_job_is_one_row_from_its_submit(site: Site) -> None:
    row = _by_id(site.export())[site.short("plain")]
    _expect(row, submit_time=100.0, duration_s=1000.0, queue_delay_s=100.0, attempts=1, outcome="succeeded",
            censored=False, num_gpus=1, workers=1, gpus_per_worker=1, gpu_type="a100", num_cpus=2.0,
            memory_mib=8192, tenant="acme", job_kind="evaluation", time_limit_s=3600.0, name="plain")


def test_a_retried_task_sums_its_attempts_run_time_and_counts_them(site: Site) -> None:
    row = _by_id(site.export())[site.short("retried")]
    # 600 s in the failed attempt + 400 s in the one that succeeded; delay to the first start
    _expect(row, submit_time=300.0, duration_s=1000.0, attempts=2, outcome="succeeded", censored=False,
            queue_delay_s=20.0, num_gpus=2, time_limit_s=7200.0, job_kind="training")


def test_a_held_job_is_eligible_from_its_release(site: Site) -> None:
    row = _by_id(site.export())[site.short("held")]
    _expect(row, submit_time=2000.0, queue_delay_s=160.0, duration_s=600.0, tenant="beta", outcome="succeeded")


def test_a_running_job_is_censored_with_its_run_time_up_to_the_cut(site: Site) -> None:
    export = site.export(now=5000)
    row = _by_id(export)[site.short("running")]
    _expect(row, submit_time=500.0, duration_s=4300.0, outcome="running", censored=True, attempts=1)
    later = _by_id(site.export(now=6000))[site.short("running")]
    assert later.duration_s == 5300.0


def test_a_preempted_task_waiting_for_its_retry_is_censored(site: Site) -> None:
    row = _by_id(site.export())[site.short("preempted")]
    _expect(row, duration_s=300.0, outcome="preempted", censored=True, attempts=1)


def test_never_started_tasks_are_skipped_and_counted(site: Site) -> None:
    export = site.export()
    ids = set(_by_id(export))
    assert site.short("waiting") not in ids and site.short("launching") not in ids
    assert f"{site.short('array')}_5" not in ids
    assert export.skipped_never_started == 3  # waiting, launching, array element 5
    assert export.jobs == 9 and len(export.rows) == 8 and export.censored == 2


def test_a_gang_has_its_workers_and_gpus_per_worker(site: Site) -> None:
    row = _by_id(site.export())[site.short("gang")]
    _expect(row, num_gpus=8, workers=2, gpus_per_worker=4, gpu_type="h100", num_cpus=16.0, memory_mib=65536,
            duration_s=1000.0, queue_delay_s=100.0)


def test_each_array_element_is_a_row_named_by_its_index(site: Site) -> None:
    rows = _by_id(site.export())
    short = site.short("array")
    _expect(rows[f"{short}_0"], submit_time=800.0, duration_s=100.0, queue_delay_s=100.0, num_gpus=1)
    _expect(rows[f"{short}_3"], submit_time=800.0, duration_s=300.0, queue_delay_s=150.0)


def test_the_store_is_read_as_it_stood_at_the_cut(site: Site) -> None:
    export = site.export(until=T0 + timedelta(seconds=1100))
    rows = _by_id(export)
    # the plain job ended at 1200: at 1100 it was running for 900 s, its end not yet recorded
    _expect(rows[site.short("plain")], duration_s=900.0, outcome="running", censored=True)
    # the retried task's second attempt started at 1100: not before the cut
    _expect(rows[site.short("retried")], duration_s=600.0, attempts=1, outcome="failed", censored=True)
    assert site.short("held") not in rows  # released at 2000: never started before the cut
    assert export.cut == T0 + timedelta(seconds=1100)


def test_the_launch_delay_is_the_median_over_the_attempts_started_before_the_cut(site: Site) -> None:
    # started_at − created_at of the attempts that started: plain 40, retried 10 and 100, held 60, running 100,
    # gang 50, array 50 and 50, preempted 50 (the launching one never started): median 50 of 9
    export = site.export()
    assert (export.launch_delay_s, export.launch_attempts) == (50.0, 9)
    # submitted in [350, 750), cut at 750: only "running" (created 600, started 700) had started
    with site.db.session() as session:
        window = history_rows(session, T0 + timedelta(seconds=350), T0 + timedelta(seconds=750),
                              now=T0 + timedelta(seconds=5000))
    assert (window.launch_delay_s, window.launch_attempts) == (100.0, 1)
    # before 200 nothing had started: no measure
    early = site.export(until=T0 + timedelta(seconds=150))
    assert (early.launch_delay_s, early.launch_attempts, early.rows) == (0.0, 0, [])
    assert anonymized(export).launch_delay_s == 50.0  # the measure is no name: kept


def test_jobs_submitted_outside_the_window_are_left_out(site: Site) -> None:
    with site.db.session() as session:
        export = history_rows(session, T0 + timedelta(seconds=350), T0 + timedelta(seconds=750),
                              now=T0 + timedelta(seconds=5000))
    # submitted in [350, 750): held, running, waiting, launching, gang; until is also the cut, and by 750
    # only "running" had started (the held job was released at 2000, the gang started at 800)
    assert export.jobs == 5 and export.skipped_never_started == 4
    row = _by_id(export)[site.short("running")]
    _expect(row, submit_time=500.0 - 350.0, duration_s=750.0 - 700.0, censored=True)


def test_begin_and_a_satisfied_dependency_make_the_task_eligible_later(db: Database, clock: Clock) -> None:
    s = Site(db, Service(db), clock, {})
    (first,) = s.submit("first", 10, evaluation("first", "acme", resources=ONE_GPU))
    s.run(first, 20, [(LAUNCH, 25), (RUN, 30), (OK, 1200)])
    (later,) = s.submit("later", 50, evaluation("later", "acme", resources=ONE_GPU,
                                                dependency=f"afterok:{s.short('first')}"))
    s.run(later, 1250, [(LAUNCH, 1260), (RUN, 1300), (OK, 1400)])
    (begun,) = s.submit("begun", 60, evaluation("begun", "acme", resources=ONE_GPU,
                                                begin=(T0 + timedelta(seconds=3000)).isoformat()))
    s.run(begun, 3010, [(LAUNCH, 3015), (RUN, 3020), (OK, 3100)])
    rows = _by_id(s.export())
    _expect(rows[s.short("later")], submit_time=1200.0, queue_delay_s=100.0)  # eligible when "first" ended
    _expect(rows[s.short("begun")], submit_time=3000.0, queue_delay_s=20.0)


SITE_CLUSTER = """
name: site
node_groups:
  - {name: a100, count: 2, gpus: 8, gpu_type: a100}
  - {name: h100, count: 2, gpus: 8, gpu_type: h100}
"""


def _site_cluster(folder: Path) -> ClusterSpec:
    path = folder / "site.yaml"
    path.write_text(SITE_CLUSTER)
    return load_cluster(str(path))


def test_eligibility_never_comes_after_the_first_attempt(db: Database, clock: Clock) -> None:
    # "after" ran when "first" failed at 1000; then "first" was retried by hand and ended again at
    # 3000: the store now says it ended at 3000, yet "after" was placed at 1050, so it was eligible by then
    s = Site(db, Service(db), clock, {})
    (first,) = s.submit("first", 10, evaluation("first", "acme", resources=ONE_GPU, retry={"max_attempts": 1}))
    s.run(first, 20, [(LAUNCH, 25), (RUN, 30), (AttemptState.FAILED, 1000)])
    (after,) = s.submit("after", 50, evaluation("after", "acme", resources=ONE_GPU,
                                                dependency=f"afterany:{s.short('first')}"))
    s.run(after, 1050, [(LAUNCH, 1060), (RUN, 1100), (OK, 1400)])
    clock.at(2000)
    s.service.retry(s.jobs["first"][0])
    s.run(first, 2100, [(LAUNCH, 2110), (RUN, 2200), (OK, 3000)])
    rows = _by_id(s.export())
    _expect(rows[s.short("after")], submit_time=1050.0, queue_delay_s=50.0, duration_s=300.0)
    _expect(rows[s.short("first")], submit_time=10.0, duration_s=970.0 + 800.0, attempts=2, outcome="succeeded")


def test_the_csv_loads_in_the_simulator_with_each_gang_shape(site: Site, tmp_path: Path) -> None:
    export = site.export()
    path = tmp_path / "trace.csv"
    with path.open("w", newline="") as handle:
        assert write_trace(export.rows, handle) == len(export.rows)
    jobs, report = load_trace(path)
    assert report.loaded == len(export.rows) == 8 and report.skipped_no_duration == 0
    loaded = {job.job_id: job for job in jobs}
    gang = loaded[site.short("gang")]
    assert (gang.num_gpus, gang.workers, gang.gpus_per_worker, gang.gpu_type) == (8, 2, 4, "h100")
    plain = loaded[site.short("plain")]
    assert (plain.submit_time, plain.duration_s, plain.tenant, plain.kind_label) == (100.0, 1000.0, "acme", "evaluation")
    # the engine replays every row; the gang keeps its 2 × 4 shape on 8-GPU nodes (node size alone would say 1 × 8)
    config = SimConfig(estimate="noise", noise_factor=1.0, warmup_hours=0.0, cycle_interval_s=0.0, idle_cycle_s=0.0)
    result = Engine(jobs, _site_cluster(tmp_path), fifo.schedule, None, config).run()
    assert [job.state for job in result.jobs] == [JobState.DONE] * len(jobs)
    replayed = {job.trace.job_id: job for job in result.jobs}
    assert (replayed[gang.job_id].workers, replayed[gang.job_id].gpus_per_worker) == (2, 4)


def test_the_csv_header_and_a_row_are_the_documented_columns(site: Site) -> None:
    handle = io.StringIO()
    write_trace(site.export().rows, handle)
    rows = list(csv.DictReader(io.StringIO(handle.getvalue())))
    assert tuple(rows[0]) == COLUMNS
    gang = next(row for row in rows if row["job_id"] == site.short("gang"))
    assert {k: gang[k] for k in ("num_gpus", "workers", "gpus_per_worker", "censored", "outcome", "num_cpus")} == {
        "num_gpus": "8", "workers": "2", "gpus_per_worker": "4", "censored": "0", "outcome": "succeeded",
        "num_cpus": "16"}


def test_anonymize_hides_tenants_users_and_names_but_keeps_equal_ones_equal(site: Site) -> None:
    export = site.export()
    hidden = anonymized(export)
    handle = io.StringIO()
    write_trace(hidden.rows, handle)
    text = handle.getvalue()
    for secret in ("acme", "beta", "plain", "retried", "gang", site.short("plain")):
        assert secret not in text, secret
    by_tenant: dict[str, set[str]] = {}
    for before, after in zip(export.rows, hidden.rows, strict=True):
        by_tenant.setdefault(before.tenant, set()).add(after.tenant)
        assert after.name != before.name and after.user != before.user
        assert (after.duration_s, after.submit_time, after.num_gpus) == (before.duration_s, before.submit_time,
                                                                          before.num_gpus)
    assert all(len(names) == 1 for names in by_tenant.values())  # equal tenants stay equal
    assert by_tenant["acme"] != by_tenant["beta"]
    # array elements keep their index under one hashed job id
    elements = [after.job_id for after, before in zip(hidden.rows, export.rows, strict=True) if before.name == "array"]
    assert len({e.split("_")[0] for e in elements}) == 1 and sorted(e.split("_")[1] for e in elements) == ["0", "3"]
    # a second export takes a new key: its digests cannot be joined with the first's
    again = anonymized(export)
    assert {row.tenant for row in again.rows}.isdisjoint({row.tenant for row in hidden.rows})


@pytest.mark.parametrize(
    ("since", "until", "problem"),
    [("400d", None, f"at most {MAX_WINDOW_DAYS}"), ("1d", "2d", "must be after"), ("soon", None, "--since 'soon'"),
     ("14d", "2026-13-01", "--until"), ("2026-01-01", "2025-12-01", "must be after")],
)
def test_a_bad_window_is_refused(since: str, until: str | None, problem: str) -> None:
    with pytest.raises(InvalidRequest) as caught:
        parse_window(since, until, T0)
    assert problem in str(caught.value) and "\n" not in str(caught.value)


def test_a_window_is_read_as_durations_ago_or_iso_dates() -> None:
    assert parse_window("14d", None, T0) == (T0 - timedelta(days=14), T0)
    assert parse_window("12h", "30m", T0) == (T0 - timedelta(hours=12), T0 - timedelta(minutes=30))
    assert parse_window("2026-02-01", "2026-02-02T12:00:00Z", T0) == (
        datetime(2026, 2, 1, tzinfo=UTC), datetime(2026, 2, 2, 12, tzinfo=UTC))
    assert parse_window("366d", None, T0)[0] == T0 - timedelta(days=366)
