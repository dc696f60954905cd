"""A noisy neighbour on the dev cluster (issue 16): oscar floods research while alice and bob submit as usual.

One real ``metasched serve`` (PostgreSQL, MUNGE, the real Slurm commands, period 2 s). Research's
pending-job limit comes from Slurm (``sacctmgr modify account research set GrpSubmitJobs=N``,
restored afterwards; the daemon syncs it), its submit rate from metasched's tenant setting.

alice (tenant-a, one A100) and bob (tenant-b, one H100) each submit ``OTHERS`` 3-second jobs with
the installed CLI, one pair a round, while a probe lists alice's jobs twice a second. Half of
their rounds run as the baseline, half under the flood: oscar posts ``METASCHED_FLOOD_JOBS``
(default 20,000, over the flood's quarters together) one-T4 jobs of ``METASCHED_FLOOD_JOB_S``
seconds (default 20; 0 for a churn of empty jobs) to ``POST /v1/jobs/batch`` in batches of 100
as fast as the API answers (on 429 it waits Retry-After, on 403 half a second).

The measurement is paired so that what differs is the flood: the rounds run in quarters ordered
``ORDER`` (baseline, flood, flood, baseline, ...: a slow drift of the daemon's period against
slurmctld's one-second scheduling pass cancels out), and each round submits at the same offset
into the daemon's period in both phases (common random numbers: the wait for the next cycle,
uniform over the 2 s period, is the largest part of a delay and would otherwise swamp it).

The flood's jobs run on the T4 nodes, so the others never wait for its GPUs: what is measured is
what a flood costs them through the shared control plane (API, store, the scheduler's period,
slurmctld). Asserted (what cannot flake): the flood refused with 429 and 403, audited; the API
answering throughout; oscar's CLI refused in sbatch's line; the daemon's period within its budget;
every job of the others run. Printed: each other tenant's mean queue delay (submit -> the job's
own start stamp) and GPU share (GPU-seconds while it was submitting) against the baseline, each
delay split into its stages (to placement, launch mark, slurmctld's submit, allocation, the job's
start) and the API's p50/p99 latency. Those figures are a benchmark, not a test: on a fresh
machine the delay rose 23% one run in CI and 1-4% on a warm one, so they are held to a bound only
when ``METASCHED_NOISY_TOLERANCE`` asks (docs/benchmarks.md runs it with 0.10).
"""
from __future__ import annotations

import http.client
import itertools
import json
import os
import random
import re
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import tempfile
import threading
import time
from collections.abc import Iterator
from dataclasses import dataclass, field
from datetime import UTC, datetime
from pathlib import Path

import pytest
from sqlalchemy import select

from meta.service.api import Service
from meta.store import audit
from meta.store.db import Database
from meta.store.models import Attempt, CycleRecord, Tenant
from meta.store.reset import truncate_all
from tenants.credential import request_payload
from tenants.quotas import set_tenant
from tests.identity.conftest import MUNGE_SOCKET, REPO
from tests.identity.users import Call, munge_as, run_one

pytestmark = pytest.mark.slurm

PERIOD_S = 2.0
OTHERS = 32  # jobs per other tenant and phase, in four quarters
ORDER = "BFFBBFFB"  # the quarters of the baseline (B) and the flood (F) phases, in the order they run
OTHER_GAP_S = 2.0  # at least this between two rounds of the others' submits


def _stratified_offsets(count: int, seed: int = 16) -> list[float]:
    """_stratified_offsets are ``count`` points in [0, PERIOD_S), one in each equal slice, in a shuffled order."""
    rng = random.Random(seed)  # noqa: S311 - a measurement design, not a secret
    offsets = [(i + rng.random()) * PERIOD_S / count for i in range(count)]
    rng.shuffle(offsets)
    return offsets


OFFSETS = _stratified_offsets(OTHERS)
SLURMCTLD_LOG = Path("/var/log/slurm/slurmctld.log")  # deploy/slurm/slurm.conf: where the stages' Slurm instants are
FLOOD_JOBS = int(os.environ.get("METASCHED_FLOOD_JOBS", "20000"))  # posted over the flood's quarters together
RETRY_403_S = 0.5
FLOOD_JOB_S = float(os.environ.get("METASCHED_FLOOD_JOB_S", "20"))  # how long each of the flood's jobs runs
FLOOD_CAP = 300  # research's GrpSubmitJobs for the test
FLOOD_RATE, FLOOD_BURST = 50.0, 200
BATCH = 100
# the others' delay and share within this fraction of the baseline: asserted only when asked (a benchmark's bound)
TOLERANCE = float(os.environ["METASCHED_NOISY_TOLERANCE"]) if os.environ.get("METASCHED_NOISY_TOLERANCE") else None
OTHER_JOB = """\
kind: evaluation
name: NAME
tenant: TENANT
resources: {cpus: 1, memory: 256M, gpus: 1, gpu_type: GPU}
time_limit: 5m
command: |
  python3 -c 'import time; print(time.time())' > "stamp.$METASCHED_ATTEMPT_ID"
  sleep 3
"""
FLOOD_JOB = """\
kind: evaluation
name: flood
tenant: research
resources: {cpus: 1, memory: 128M, gpus: 1, gpu_type: t4}
time_limit: 5m
command: "sleep SECONDS"
"""


@dataclass
class Phase:
    """Phase is what one phase measured."""

    name: str
    windows: list[tuple[float, float]] = field(default_factory=list)  # each block's first to last submit by the others

    @property
    def seconds(self) -> float:
        """seconds is the phase's length: its blocks' together."""
        return sum(end - start for start, end in self.windows)
    submit_s: list[float] = field(default_factory=list)  # the others' CLI submits, wall
    probe_s: list[float] = field(default_factory=list)
    flood_s: list[float] = field(default_factory=list)
    flood_status: dict[int, int] = field(default_factory=dict)
    flood_offered: int = 0  # jobs posted, accepted or not
    flood_accepted: int = 0
    jobs: dict[str, list[str]] = field(default_factory=dict)  # tenant -> job ids
    queue_s: dict[str, float] = field(default_factory=dict)
    parts_s: dict[str, dict[str, float]] = field(default_factory=dict)  # tenant -> stage -> mean seconds
    share: dict[str, float] = field(default_factory=dict)
    period_gaps: list[float] = field(default_factory=list)
    cycle_s: list[float] = field(default_factory=list)
    errors: list[str] = field(default_factory=list)  # what went wrong in the flood and probe threads


@dataclass(frozen=True)
class Served:
    """Served is the running service on the real cluster."""

    socket: Path
    service: Service
    log: Path
    folders: dict[str, Path]


def _free_port() -> int:
    with socket.socket() as probe:
        probe.bind(("127.0.0.1", 0))
        return int(probe.getsockname()[1])


def _grp_submit_jobs(value: str) -> None:
    subprocess.run(["sacctmgr", "-i", "modify", "account", "where", "name=research", "set", f"GrpSubmitJobs={value}"],
                   capture_output=True, text=True, timeout=60, check=True)  # fmt: skip


def _user_folder(user: str) -> Path:
    folder = Path(tempfile.mkdtemp(prefix=f"metasched-flood-{user}-", dir="/tmp"))
    folder.chmod(0o755)
    shutil.chown(folder, user=user, group=user)
    return folder


@pytest.fixture
def served(slurm_exclusive: None, installed_cli: Path, pg_database: Database, shared_folder: Path) -> Iterator[Served]:
    """served runs ``metasched serve`` on the real cluster with research's GrpSubmitJobs set in Slurm."""
    truncate_all(pg_database)
    before = subprocess.run(["sacctmgr", "-n", "-P", "show", "assoc", "where", "account=research", "user=",
                             "format=GrpSubmitJobs"], capture_output=True, text=True, timeout=60).stdout.split()  # fmt: skip
    _grp_submit_jobs(str(FLOOD_CAP))
    folders = {user: _user_folder(user) for user in ("alice", "bob", "oscar")}
    sock = shared_folder / "run" / "api.sock"
    argv = [
        sys.executable, "-c", "from cli.main import main; main()", "--db", pg_database.url, "serve",
        "--state-dir", str(shared_folder / "state"), "--metrics-port", str(_free_port()), "--period", str(PERIOD_S),
        "--api-socket", str(sock), "--api-listen", "off", "--munge-socket", str(MUNGE_SOCKET), "--log-level", "INFO",
    ]  # fmt: skip
    log = shared_folder / "serve.log"
    with log.open("w") as out:
        proc = subprocess.Popen(argv, cwd=REPO, stdout=out, stderr=subprocess.STDOUT)
    service = Service(pg_database)
    try:
        deadline = time.monotonic() + 60
        while not sock.exists():
            assert proc.poll() is None, log.read_text()[-4000:]
            assert time.monotonic() < deadline, "the API socket never appeared"
            time.sleep(0.1)
        yield Served(sock, service, log, folders)
    finally:
        _cancel_research(Served(sock, service, log, folders))
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=60)
        except subprocess.TimeoutExpired:
            proc.kill()
            proc.wait()
        subprocess.run(["scancel", "-A", "research", "-u", "oscar"], capture_output=True, timeout=60)
        _grp_submit_jobs(before[0] if before else "-1")
        for folder in folders.values():
            shutil.rmtree(folder, ignore_errors=True)


def _research_in_slurm() -> bool:
    out = subprocess.run(["squeue", "-h", "-A", "research", "-o", "%i"], capture_output=True, text=True, timeout=60)
    return bool(out.stdout.strip())


def _wait(done, timeout_s: float) -> bool:
    deadline = time.monotonic() + timeout_s
    while not done():
        if time.monotonic() > deadline:
            return False
        time.sleep(0.5)
    return True


def _call(sock: Path, user: str, method: str, target: str, body: bytes = b"") -> tuple[int, dict, dict, float]:
    """_call sends one authenticated request as ``user``; (status, answer, headers, seconds of the exchange)."""
    credential = munge_as(user, payload=request_payload(method, target, body))
    connection = http.client.HTTPConnection("localhost", timeout=120)
    raw = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    raw.connect(str(sock))
    connection.sock = raw
    headers = {"Authorization": f"MUNGE {credential}", "Content-Type": "application/json"}
    started = time.perf_counter()
    try:
        connection.request(method, target, body=body or None, headers=headers)
        response = connection.getresponse()
        answer = json.loads(response.read() or b"null")
        return response.status, answer, dict(response.getheaders()), time.perf_counter() - started
    finally:
        connection.close()


def _guarded(work, phase: Phase):
    """_guarded runs a thread's work, keeping its failure for the test to report."""

    def run(*args: object) -> None:
        try:
            work(*args)
        except BaseException as exc:  # noqa: BLE001 - the test asserts there is none
            phase.errors.append(f"{work.__name__}: {exc!r}"[:2000])

    return run


def _flood(served: Served, phase: Phase, stop: threading.Event) -> None:
    """_flood offers FLOOD_JOBS jobs as oscar, refused ones again, as fast as the API answers, until all are in or stopped.

    On 429 it waits the Retry-After the API sends; on 403 (research at its pending limit)
    RETRY_403_S, as a script that retries twice a second would.
    """
    folder = str(served.folders["oscar"])
    spec = FLOOD_JOB.replace("SECONDS", f"{FLOOD_JOB_S:g}")
    while phase.flood_offered < FLOOD_JOBS and not stop.is_set():
        count = min(BATCH, FLOOD_JOBS - phase.flood_offered)
        jobs = [{"spec_text": spec, "source": f"flood-{phase.flood_offered + i}"} for i in range(count)]
        body = json.dumps({"jobs": jobs, "tenant": "research", "submit_dir": folder}).encode()
        status, answer, headers, took = _call(served.socket, "oscar", "POST", "/v1/jobs/batch", body)
        phase.flood_offered += count
        phase.flood_s.append(took)
        phase.flood_status[status] = phase.flood_status.get(status, 0) + 1
        if status == 201:
            phase.flood_accepted += count
        elif status == 429:
            stop.wait(float(headers.get("retry-after") or answer.get("retry_after_s") or 1.0))
        else:
            assert status == 403 and answer["error"] == "SubmitLimitExceeded", (status, answer)
            stop.wait(RETRY_403_S)


def _probe(served: Served, phase: Phase, stop: threading.Event) -> None:
    while not stop.is_set():
        status, _, _, took = _call(served.socket, "alice", "GET", "/v1/jobs?limit=20")
        assert status == 200
        phase.probe_s.append(took)
        stop.wait(0.5)


def _last_cycle_at(served: Served) -> float:
    """_last_cycle_at is when the daemon's latest cycle began (seconds since the epoch)."""
    with served.service.db.session() as session:
        at = session.scalar(select(CycleRecord.at).order_by(CycleRecord.id.desc()).limit(1))
    assert at is not None, "the daemon has run no cycle"
    return _epoch(at)


def _sleep_to_offset(served: Served, offset_s: float) -> None:
    """_sleep_to_offset waits until ``offset_s`` into the daemon's next period (its cycles are PERIOD_S apart)."""
    now = time.time()
    since = (now - _last_cycle_at(served)) % PERIOD_S
    time.sleep((offset_s - since) % PERIOD_S)


def _others(served: Served, phase: Phase, offsets: list[float]) -> None:
    """_others has alice and bob submit OTHERS jobs each, interleaved, each pair at OFFSETS[i] into a period.

    Both phases use the same offsets (common random numbers): the wait for the next cycle, which
    is uniform over the period and dwarfs what the flood may add, is then the same in both and
    the difference of the means measures the flood, not where in the period each submit fell.
    """
    for user, tenant, gpu in (("alice", "tenant-a", "a100"), ("bob", "tenant-b", "h100")):
        spec = OTHER_JOB.replace("TENANT", tenant).replace("GPU", gpu).replace("NAME", f"{phase.name}-{user}")
        path = served.folders[user] / "job.yaml"
        path.write_text(spec)
        shutil.chown(path, user=user, group=user)
    for offset in offsets:
        time.sleep(OTHER_GAP_S)
        _sleep_to_offset(served, offset)
        for user, tenant in (("alice", "tenant-a"), ("bob", "tenant-b")):
            started = time.perf_counter()
            outcome = run_one(Call(user, ("submit", "-f", "job.yaml", "--json")), f"unix://{served.socket}",
                              served.folders[user])  # fmt: skip
            phase.submit_s.append(time.perf_counter() - started)
            assert outcome.code == 0, outcome.stderr
            phase.jobs.setdefault(tenant, []).append(json.loads(outcome.stdout)["id"])


def _finished(served: Served, phase: Phase) -> bool:
    ids = [j for jobs in phase.jobs.values() for j in jobs]
    return all(served.service.status(j).state in ("succeeded", "failed", "cancelled") for j in ids)


def _measure(served: Served, phase: Phase) -> None:
    """_measure reads each job's start stamp against its submit time, the GPU share and the period."""
    slurm = _slurm_events()
    for tenant, ids in phase.jobs.items():
        user = "alice" if tenant == "tenant-a" else "bob"
        delays, stages, busy = [], [], 0.0
        for job_id in ids:
            status = served.service.status(job_id)
            assert status.summary.state == "succeeded", status.to_dict()
            attempt = status.tasks[0].attempts[-1]
            start = float((served.folders[user] / f"stamp.{attempt.id}").read_text())
            submitted = _epoch(datetime.fromisoformat(status.summary.submitted_at or ""))
            delays.append(start - submitted)
            stages.append(_stages(served, attempt.id, submitted, start, slurm))
            busy += sum(max(0.0, min(end, start + 3.0) - max(begin, start)) for begin, end in phase.windows)  # 1 GPU, 3 s
        phase.queue_s[tenant] = statistics.mean(delays)
        phase.parts_s[tenant] = {name: statistics.mean(s[name] for s in stages) for name in stages[0]}
        phase.share[tenant] = busy / phase.seconds
    with served.service.db.session() as session:
        rows = session.execute(select(CycleRecord.at, CycleRecord.duration_s).order_by(CycleRecord.id)).all()
    for start, end in phase.windows:  # gaps within each block (not the pause between two blocks)
        inside = [(_epoch(at), took) for at, took in rows if start <= _epoch(at) <= end]
        phase.period_gaps += [b[0] - a[0] for a, b in zip(inside, inside[1:], strict=False)]
        phase.cycle_s += [took for _, took in inside]


def _stages(served: Served, attempt_id: str, submitted: float, started: float, slurm: dict[str, dict[str, float]]
            ) -> dict[str, float]:  # fmt: skip
    """_stages splits one job's queue delay: to its placement, its launch mark, slurmctld's submit, its allocation, its start."""
    with served.service.db.session() as session:
        created, sent, job = session.execute(select(Attempt.created_at, Attempt.launch_sent_at, Attempt.slurm_job_id)
                                             .where(Attempt.id == attempt_id)).one()  # fmt: skip
    times = slurm.get(str(job), {})
    placed, marked = _epoch(created), _epoch(sent)
    rpc, allocated = times.get("submit", marked), times.get("allocate", marked)
    return {"placed": placed - submitted, "marked": marked - placed, "sbatch": rpc - marked,
            "slurm": allocated - rpc, "started": started - allocated}  # fmt: skip


_SLURM_EVENT = re.compile(r"^\[([0-9T:.-]+)\] (?:_slurm_rpc_submit_batch_job: JobId=(\d+)|"
                          r"sched: Allocate JobId=(\d+)|sched/backfill: _start_job: Started JobId=(\d+))")  # fmt: skip


def _slurm_events() -> dict[str, dict[str, float]]:
    """_slurm_events are slurmctld's logged submit and allocation instants per Slurm job id (its log's clock)."""
    events: dict[str, dict[str, float]] = {}
    for line in SLURMCTLD_LOG.read_text(errors="replace").splitlines():
        if (found := _SLURM_EVENT.match(line)) is None:
            continue
        at = datetime.fromisoformat(found.group(1)).astimezone(UTC).timestamp()
        if found.group(2):
            events.setdefault(found.group(2), {})["submit"] = at
        else:
            events.setdefault(found.group(3) or found.group(4), {}).setdefault("allocate", at)
    return events


def _epoch(at: datetime) -> float:
    """_epoch is a stored instant (UTC, naive or aware) in seconds since the epoch."""
    return (at if at.tzinfo else at.replace(tzinfo=UTC)).timestamp()


def _run_block(served: Served, phase: Phase, rounds: list[list[float]], flood: bool) -> None:
    """_run_block has the others submit at each list of offsets in turn (a window each), with or without the flood."""
    stop = threading.Event()
    threads = [threading.Thread(target=_guarded(_probe, phase), args=(served, phase, stop), daemon=True)]
    if flood:
        threads.append(threading.Thread(target=_guarded(_flood, phase), args=(served, phase, stop), daemon=True))
    for thread in threads:
        thread.start()
    if flood:  # the flood is at its limit before the others begin
        assert _wait(lambda: phase.flood_status.get(403, 0) > 0 or phase.errors, 120), phase.flood_status
    for offsets in rounds:
        started = time.time()
        _others(served, phase, offsets)
        phase.windows.append((started, time.time()))  # while the others submitted: what their share is taken over
        assert _wait(lambda: _finished(served, phase), 300), served.log.read_text()[-3000:]
    stop.set()
    for thread in threads:
        thread.join(timeout=150)
    if flood:  # the next block runs without it: research's queue emptied, in metasched and in Slurm
        assert _cancel_research(served), "research's jobs still in Slurm 2 minutes after their cancel"


def _cancel_research(served: Served) -> bool:
    """_cancel_research cancels research's unfinished jobs; False if Slurm still runs some of them after 2 minutes."""
    for job in served.service.list_jobs(tenant="research", limit=100_000):
        if job.state in ("pending", "running"):
            served.service.cancel(job.id)
    return _wait(lambda: not _research_in_slurm(), 120)


def _run_phases(served: Served) -> tuple[Phase, Phase]:
    """_run_phases runs the others' quarters in the order ORDER (B: baseline, F: flood), so a drift over the run cancels out.

    Slurm's own scheduling of a submitted batch job waits for its controller's next one-second
    pass, and the daemon's period drifts against those passes by a few ms a second: measured
    one after the other, the two phases would differ by that drift alone.
    """
    phases = {"B": Phase("baseline"), "F": Phase("flood")}
    quarters = [OFFSETS[i::4] for i in range(4)]
    taken = {"B": 0, "F": 0}
    for kind, group in itertools.groupby(ORDER):
        count = len(list(group))
        rounds = quarters[taken[kind] : taken[kind] + count]
        taken[kind] += count
        _run_block(served, phases[kind], rounds, flood=kind == "F")
    for phase in phases.values():
        _measure(served, phase)
    return phases["B"], phases["F"]


def _pct(values: list[float], q: float) -> float:
    ordered = sorted(values)
    return ordered[min(len(ordered) - 1, int(round(q / 100 * (len(ordered) - 1))))] if ordered else 0.0


def _report(phase: Phase) -> str:
    lines = [f"{phase.name}: {phase.seconds:.0f} s in {len(phase.windows)} block(s)"]
    for tenant in sorted(phase.queue_s):
        parts = ", ".join(f"{name} {took:.2f}" for name, took in phase.parts_s[tenant].items())
        lines.append(f"  {tenant}: queue mean {phase.queue_s[tenant]:.2f} s ({parts}), "
                     f"GPUs held on average {phase.share[tenant]:.3f}")  # fmt: skip
    for what, values in (("probe GET /v1/jobs", phase.probe_s), ("others' CLI submit", phase.submit_s),
                         ("flood POST /v1/jobs/batch", phase.flood_s)):  # fmt: skip
        if values:
            lines.append(f"  API {what}: n={len(values)} p50 {_pct(values, 50) * 1000:.0f} ms, "
                         f"p99 {_pct(values, 99) * 1000:.0f} ms")  # fmt: skip
    lines.append(f"  period: {len(phase.cycle_s)} cycles, gap p50 {_pct(phase.period_gaps, 50):.2f} s, "
                 f"p99 {_pct(phase.period_gaps, 99):.2f} s, max {max(phase.period_gaps, default=0):.2f} s; "
                 f"snapshot+policy max {max(phase.cycle_s, default=0):.3f} s")  # fmt: skip
    if phase.flood_s:
        lines.append(f"  flood: {phase.flood_offered:,} jobs posted, {phase.flood_accepted} accepted; "
                     f"answers {phase.flood_status}")  # fmt: skip
    return "\n".join(lines)


def test_a_flooding_tenant_is_refused_and_audited_while_the_others_jobs_run(served: Served) -> None:
    with served.service.db.session() as session:  # metasched's setting: Slurm has no submit rate
        set_tenant(session, "research", actor="test", submit={"rate": FLOOD_RATE, "burst": FLOOD_BURST})
    # the daemon synced research's GrpSubmitJobs from Slurm; the API reads limits every 5 s
    assert _wait(lambda: _limits(served).get("max_pending") == FLOOD_CAP, 60), _limits(served)
    time.sleep(6)
    baseline, flooded = _run_phases(served)
    print("\n" + _report(baseline) + "\n" + _report(flooded), flush=True)
    # oscar's own CLI over a per-user limit (metasched's: Slurm sets no MaxSubmitJobs here): sbatch's line, exit 1
    with served.service.db.session() as session:
        set_tenant(session, "research", actor="test", submit={"max_pending_per_user": 0})
    time.sleep(6)  # the API reads limits every 5 s
    (served.folders["oscar"] / "flood.yaml").write_text(FLOOD_JOB.replace("SECONDS", "0"))
    refused = run_one(Call("oscar", ("submit", "-f", "flood.yaml")), f"unix://{served.socket}", served.folders["oscar"])
    assert refused.code == 1, refused
    assert "Batch job submission failed: Job violates accounting/QOS policy" in refused.stderr, refused.stderr
    # research may still hold its GrpSubmitJobs' worth (refused for the tenant first), else oscar's own limit of 0
    assert "AssocMaxSubmitJobLimit, user oscar" in refused.stderr or "AssocGrpSubmitJobsLimit" in refused.stderr
    assert not baseline.errors and not flooded.errors, baseline.errors + flooded.errors  # the API answered
    assert all(len(phase.jobs[t]) == OTHERS for phase in (baseline, flooded) for t in ("tenant-a", "tenant-b"))
    assert flooded.flood_status.get(429, 0) > 0 and flooded.flood_status.get(403, 0) > 0, flooded.flood_status
    assert max(flooded.period_gaps) <= 2 * PERIOD_S, _report(flooded)  # no period overran its budget
    with served.service.db.session() as session:
        refused = [line for line in audit.read(session, tenant="research", limit=1000)
                   if line.action == "job.submit.refused"]  # fmt: skip
    assert {"rate", "tenant_pending"} <= {line.detail["reason"] for line in refused}
    assert all(line.actor == "oscar" for line in refused)
    slower = {t: flooded.queue_s[t] / baseline.queue_s[t] - 1 for t in ("tenant-a", "tenant-b")}
    shares = {t: flooded.share[t] / baseline.share[t] - 1 for t in ("tenant-a", "tenant-b")}
    print("the others' queue delay under the flood: " + ", ".join(f"{t} {v:+.0%}" for t, v in slower.items())
          + "; GPU share: " + ", ".join(f"{t} {v:+.1%}" for t, v in shares.items()), flush=True)
    if TOLERANCE is not None:  # the benchmark's bound (docs/benchmarks.md), not CI's: wall-clock figures on a shared host
        assert all(abs(v) <= TOLERANCE for v in shares.values()), f"the others' GPU share moved by {shares}"
        assert all(v <= TOLERANCE for v in slower.values()), f"the others' queue delay rose by {slower}\n{_report(flooded)}"


def _limits(served: Served) -> dict:
    with served.service.db.session() as session:
        tenant = session.get(Tenant, "research")
        return dict(tenant.submit_limits or {}) if tenant is not None else {}
