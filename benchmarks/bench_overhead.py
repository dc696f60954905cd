"""bench_overhead: what metasched costs on top of plain sbatch, on the dev cluster.

The same N short 1-CPU jobs run twice, one phase after the other: submitted with plain
``sbatch --wrap`` (serially, as a user script would), then through metasched (submitted to the
store while an in-process daemon runs its periods). Each job stamps its own start and end time
(sub-second, sacct only has seconds) into a shared file. Reported per phase:

- makespan: first submission to last job end, and the metasched/plain ratio (target <= 1.3);
- submit-to-start latency p50/p99 (metasched: from its own submit time to the Slurm start),
  from the job's stamps and from sacct Submit/Start (whole seconds);
- Slurm reads per daemon period (squeue + sacct + sinfo, from the runner's counter) with an
  empty queue and with a large one: the reconciler batches, so this must not grow with the queue;
- slurmctld RPCs by type from ``sdiag`` (reset with ``sdiag -r`` before each phase); other
  users of the cluster add to these counts, so the benchmark holds the Slurm test lock.

With ``--rounds N`` the two phases alternate N times (plain, metasched, plain, ...) and the
makespan ratio is reported per round and as the median: on a 2-core host shared with six
slurmd, one pair of runs swings by a second either way. The table shows the median round.

Run (root, dev cluster up): ``python benchmarks/bench_overhead.py [--jobs 200] [--rounds 3] [--json]``.
``--db`` takes a PostgreSQL URL whose schema is *dropped and recreated* (a scratch database);
the default is a fresh SQLite file.
"""

from __future__ import annotations

import argparse
import fcntl
import json
import subprocess
import sys
import tempfile
import threading
import time
import uuid
from collections import Counter
from dataclasses import dataclass, field
from datetime import datetime
from pathlib import Path

from sqlalchemy import func, select, text

sys.path.insert(0, str(Path(__file__).resolve().parents[1]))

from meta.cycle.actuate.launch_plan import LaunchSettings  # noqa: E402
from meta.cycle.daemon import Daemon, DaemonConfig  # noqa: E402
from meta.cycle.reconcile import ReconcileSettings  # noqa: E402
from meta.model.spec import spec_from_dict  # noqa: E402
from meta.model.states import LIVE_ATTEMPT_STATES, JobState, TaskState  # noqa: E402
from meta.service.api import Service  # noqa: E402
from meta.store.db import Database  # noqa: E402
from meta.store.migrate import upgrade  # noqa: E402
from meta.store.models import Attempt, Job, Task  # noqa: E402
from slurm_bridge.commands import CliSlurmClient  # noqa: E402
from slurm_bridge.parse.sdiag import parse_sdiag  # noqa: E402
from slurm_bridge.runner import CommandRunner  # noqa: E402

LOCK = Path("/tmp/metasched-slurm-tests.lock")
READS = ("squeue", "sacct", "sinfo", "scontrol")
FINAL = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}


@dataclass
class Phase:
    """Phase is one run of N jobs: when each was submitted, the job stamps, sacct and sdiag."""

    name: str
    first_submit: float = 0.0
    submitted: dict[str, float] = field(default_factory=dict)  # Slurm job id -> submit time (epoch s)
    start: dict[str, float] = field(default_factory=dict)
    end: dict[str, float] = field(default_factory=dict)
    sacct_latency: list[float] = field(default_factory=list)
    rpcs: dict[str, int] = field(default_factory=dict)
    wall_s: float = 0.0
    reads_per_period: dict[str, Counter[int]] = field(default_factory=dict)
    periods: int = 0

    def makespan(self) -> float:
        """makespan is first submission to the last job's own end stamp."""
        return max(self.end.values()) - self.first_submit

    def latencies(self) -> list[float]:
        """latencies are submit-to-start times (job stamps) of every job."""
        return sorted(self.start[j] - self.submitted[j] for j in self.submitted if j in self.start)


def job_command(stamps: Path, seconds: float) -> str:
    """job_command stamps start and end (sub-second) around a sleep."""
    line = 'echo "$SLURM_JOB_ID $(date +%s.%N)'
    return f'{line} start" >> {stamps}; sleep {seconds:g}; {line} end" >> {stamps}'


def read_stamps(stamps: Path, phase: Phase) -> None:
    """read_stamps fills the phase's start and end times from the stamp file."""
    for row in stamps.read_text().splitlines():
        parts = row.split()
        if len(parts) == 3:
            (phase.start if parts[2] == "start" else phase.end)[parts[0]] = float(parts[1])


def sdiag_reset() -> None:
    """sdiag_reset zeroes slurmctld's RPC statistics."""
    subprocess.run(["sdiag", "-r"], check=True, capture_output=True, timeout=30)


def sdiag_rpcs() -> dict[str, int]:
    """sdiag_rpcs reads slurmctld's RPC counts by message type (not the per-user section)."""
    out = subprocess.run(["sdiag"], check=True, capture_output=True, text=True, timeout=30).stdout
    section = out.split("statistics by message type", 1)[-1].split("statistics by user", 1)[0]
    return parse_sdiag("Server thread count: 1\n" + section).rpc_counts


def sacct_times(job_ids: list[str]) -> dict[str, tuple[str, datetime | None, datetime | None]]:
    """sacct_times maps Slurm job id to (state, Submit, Start) — whole seconds."""
    out = subprocess.run(
        ["sacct", "-n", "-P", "-X", "-j", ",".join(job_ids), "-o", "JobID,State,Submit,Start"],
        check=True,
        capture_output=True,
        text=True,
        timeout=120,
    ).stdout
    times = {}
    for row in out.splitlines():
        job_id, state, submit, start = row.split("|")
        parse = lambda v: datetime.fromisoformat(v) if v[:1].isdigit() else None  # noqa: E731
        times[job_id] = (state, parse(submit), parse(start))
    return times


def wait_sacct_done(job_ids: list[str], timeout_s: float = 300) -> dict[str, tuple]:
    """wait_sacct_done polls sacct (slurmdbd, not slurmctld) until every job has ended."""
    deadline = time.monotonic() + timeout_s
    while True:
        times = sacct_times(job_ids)
        ended = [j for j, (state, _, _) in times.items() if state not in ("PENDING", "RUNNING", "COMPLETING")]
        if len(ended) == len(job_ids) or time.monotonic() > deadline:
            return times
        time.sleep(1.0)


def run_plain(jobs: int, seconds: float, work: Path) -> Phase:
    """run_plain submits the jobs with plain ``sbatch --wrap``, one call each, and waits for them."""
    phase = Phase("plain sbatch")
    stamps = work / "plain.stamps"
    stamps.touch()
    tag = f"bench-plain-{uuid.uuid4().hex[:8]}"
    command = job_command(stamps, seconds)
    sdiag_reset()
    phase.first_submit = time.time()
    for i in range(jobs):
        at = time.time()
        out = subprocess.run(
            ["sbatch", "--parsable", "-J", f"{tag}-{i}", "-A", "tenant-a", "-N1", "-n1", "-c1", "--mem=1G"]
            + ["-t", "5", "-o", "/dev/null", "--wrap", command],
            check=True,
            capture_output=True,
            text=True,
            timeout=60,
        )
        phase.submitted[out.stdout.strip().split(";")[0]] = at
    times = wait_sacct_done(list(phase.submitted))
    phase.wall_s = time.time() - phase.first_submit
    phase.rpcs = sdiag_rpcs()
    read_stamps(stamps, phase)
    phase.sacct_latency = sorted(
        (start - submit).total_seconds() for _, submit, start in times.values() if submit and start
    )
    return phase


def open_store(url: str | None, work: Path) -> Service:
    """open_store is a fresh, migrated store: a new SQLite file, or a PostgreSQL schema dropped and recreated."""
    if url is None:
        url = f"sqlite:///{work / 'bench.sqlite'}"
    db = Database(url)
    if url.startswith("postgresql"):
        with db.engine.begin() as connection:
            connection.execute(text("DROP SCHEMA public CASCADE"))
            connection.execute(text("CREATE SCHEMA public"))
    upgrade(db.engine, url)
    return Service(db)


def queue_size(service: Service) -> int:
    """queue_size is pending tasks plus live attempts (what each reconcile and cycle walks)."""
    live = [s.value for s in LIVE_ATTEMPT_STATES]
    with service.db.session() as session:
        pending = session.scalar(select(func.count()).where(Task.state == TaskState.PENDING.value))
        held = session.scalar(select(func.count()).where(Attempt.state.in_(live)))
    return int(pending or 0) + int(held or 0)


def drive(
    daemon: Daemon, service: Service, runner: CommandRunner, stop: threading.Event, phase: Phase
) -> None:
    """drive runs daemon periods until ``stop``, counting Slurm reads per period by queue size."""
    small, large = Counter(), Counter()
    while not stop.is_set():
        started = time.monotonic()
        size = queue_size(service)
        before = runner.counter.snapshot()
        daemon.period()
        after = runner.counter.snapshot()
        reads = sum(after.get(c, 0) - before.get(c, 0) for c in READS)
        phase.periods += 1
        if size <= 10:
            small[reads] += 1
        elif size >= 100:
            large[reads] += 1
        stop.wait(max(0.0, daemon.config.period_s - (time.monotonic() - started)))
    phase.reads_per_period = {"queue <= 10": small, "queue >= 100": large}


def unfinished_tasks(service: Service) -> int:
    """unfinished_tasks counts tasks not yet succeeded, failed or cancelled."""
    with service.db.session() as session:
        return session.scalar(
            select(func.count()).select_from(Task).where(Task.state.in_(["pending", "scheduled", "running"]))
        ) or 0


def run_metasched(jobs: int, seconds: float, work: Path, period: float, url: str | None) -> Phase:
    """run_metasched submits the jobs to metasched while an in-process daemon runs, and waits for them."""
    phase = Phase("metasched")
    stamps = work / "metasched.stamps"
    stamps.touch()
    service = open_store(url, work)
    runner = CommandRunner()
    config = DaemonConfig(
        period_s=period,
        leader_lease_s=60.0,
        holder="bench-overhead",
        launch=LaunchSettings(log_dir=str(work / "logs")),
        reconcile=ReconcileSettings(unknown_window_s=15.0, lost_grace_s=120.0),
    )
    daemon = Daemon(service.db, CliSlurmClient(runner), config)
    spec = {
        "kind": "evaluation",
        "tenant": "tenant-a",
        "resources": {"cpus": 1, "memory": "1G"},
        "time_limit": "5m",
        "command": job_command(stamps, seconds),
    }
    stop = threading.Event()
    thread = threading.Thread(target=drive, args=(daemon, service, runner, stop, phase), daemon=True)
    sdiag_reset()
    thread.start()
    try:
        time.sleep(8 * period)  # a few idle periods: the small-queue read count
        phase.first_submit = time.time()
        submitted = {}
        for i in range(jobs):
            submitted[service.submit(spec_from_dict(dict(spec, name=f"bench-{i}"))).job.short_id] = (
                time.time()
            )
        deadline = time.monotonic() + 600
        # one cheap COUNT per poll: polling 200 statuses would compete with the daemon for the GIL
        while unfinished_tasks(service) and time.monotonic() < deadline:
            time.sleep(0.5)
    finally:
        stop.set()
        thread.join(timeout=60)
    phase.wall_s = time.time() - phase.first_submit
    phase.rpcs = sdiag_rpcs()
    with service.db.session() as session:
        rows = session.execute(
            select(Job.short_id, Attempt.slurm_job_id).join(Attempt, Attempt.job_id == Job.id)
        )
        slurm_of = {short: slurm_id for short, slurm_id in rows if slurm_id}
    phase.submitted = {slurm_of[short]: at for short, at in submitted.items() if short in slurm_of}
    read_stamps(stamps, phase)
    times = wait_sacct_done(list(phase.submitted))
    phase.sacct_latency = sorted(
        (start.timestamp() - phase.submitted[j]) for j, (_, _, start) in times.items() if start
    )
    states = Counter(service.status(job).state.value for job in submitted)
    if states != Counter({JobState.SUCCEEDED.value: jobs}):
        print(f"warning: metasched job states {dict(states)}", file=sys.stderr)
    return phase


def pct(values: list[float], q: float) -> float:
    """pct is the q-quantile (nearest rank) of sorted values."""
    if not values:
        return float("nan")
    return values[min(len(values) - 1, max(0, round(q * (len(values) - 1))))]


def report(plain: Phase, meta: Phase, jobs: int, seconds: float) -> dict[str, object]:
    """report gathers the figures of both phases into one dict."""
    rpc_types = sorted(
        set(plain.rpcs) | set(meta.rpcs), key=lambda t: -(meta.rpcs.get(t, 0) + plain.rpcs.get(t, 0))
    )
    return {
        "jobs": jobs,
        "job_seconds": seconds,
        "makespan_s": {"plain": plain.makespan(), "metasched": meta.makespan()},
        "makespan_ratio": meta.makespan() / plain.makespan(),
        "latency_s": {
            p.name: {"p50": pct(p.latencies(), 0.5), "p99": pct(p.latencies(), 0.99)} for p in (plain, meta)
        },
        "sacct_latency_s": {
            p.name: {"p50": pct(p.sacct_latency, 0.5), "p99": pct(p.sacct_latency, 0.99)}
            for p in (plain, meta)
        },
        "jobs_stamped": {p.name: len(p.end) for p in (plain, meta)},
        "daemon_periods": meta.periods,
        "slurm_reads_per_period": {k: dict(v) for k, v in meta.reads_per_period.items()},
        "rpcs": {t: {"plain": plain.rpcs.get(t, 0), "metasched": meta.rpcs.get(t, 0)} for t in rpc_types},
        "rpcs_total": {"plain": sum(plain.rpcs.values()), "metasched": sum(meta.rpcs.values())},
    }


def markdown(r: dict) -> str:
    """markdown renders the report as tables."""
    lat, sl = r["latency_s"], r["sacct_latency_s"]
    lines = [
        f"### {r['jobs']} jobs of `sleep {r['job_seconds']:g}`, 1 CPU each",
        "",
        "| figure | plain sbatch | metasched |",
        "|---|---:|---:|",
        f"| makespan (s) | {r['makespan_s']['plain']:.2f} | {r['makespan_s']['metasched']:.2f} |",
        f"| makespan ratio (target <= 1.3) | 1.00 | {r['makespan_ratio']:.2f} |",
        f"| submit->start p50 (s, job stamps) | {lat['plain sbatch']['p50']:.2f} | {lat['metasched']['p50']:.2f} |",
        f"| submit->start p99 (s, job stamps) | {lat['plain sbatch']['p99']:.2f} | {lat['metasched']['p99']:.2f} |",
        f"| submit->start p50 (s, sacct Start) | {sl['plain sbatch']['p50']:.2f} | {sl['metasched']['p50']:.2f} |",
        f"| submit->start p99 (s, sacct Start) | {sl['plain sbatch']['p99']:.2f} | {sl['metasched']['p99']:.2f} |",
        f"| jobs stamped end | {r['jobs_stamped']['plain sbatch']} | {r['jobs_stamped']['metasched']} |",
        f"| slurmctld RPCs (sdiag, total) | {r['rpcs_total']['plain']} | {r['rpcs_total']['metasched']} |",
        "",
        f"Slurm reads per daemon period (squeue+sacct+sinfo+scontrol; reads -> periods), {r['daemon_periods']} periods:",
        "",
        "| queue (pending + live attempts) | reads per period -> periods |",
        "|---|---|",
    ]
    for queue, counts in r["slurm_reads_per_period"].items():
        lines.append(
            f"| {queue} | {', '.join(f'{k} reads: {v}' for k, v in sorted(counts.items())) or '-'} |"
        )
    lines += [
        "",
        "slurmctld RPCs by type (sdiag, reset before each phase):",
        "",
        "| RPC | plain | metasched |",
    ]
    lines.append("|---|---:|---:|")
    for rpc, counts in r["rpcs"].items():
        lines.append(f"| {rpc} | {counts['plain']} | {counts['metasched']} |")
    return "\n".join(lines)


def run_rounds(args: argparse.Namespace) -> dict[str, object]:
    """run_rounds alternates the two phases ``--rounds`` times and reports the median round in full."""
    rounds = []
    with LOCK.open("w") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        for n in range(1, args.rounds + 1):
            with tempfile.TemporaryDirectory(prefix="bench-overhead-") as tmp:
                work = Path(tmp)
                plain = run_plain(args.jobs, args.seconds, work)
                meta = run_metasched(args.jobs, args.seconds, work, args.period, args.db)
            rounds.append(report(plain, meta, args.jobs, args.seconds))
            print(
                f"round {n}/{args.rounds}: makespan {meta.makespan():.2f} s vs plain {plain.makespan():.2f} s"
                f" = {rounds[-1]['makespan_ratio']:.2f}",
                file=sys.stderr,
            )
    ratios = [r["makespan_ratio"] for r in rounds]
    median = sorted(rounds, key=lambda r: r["makespan_ratio"])[(len(rounds) - 1) // 2]
    return {**median, "rounds": len(rounds), "round_ratios": ratios, "median_ratio": median["makespan_ratio"]}


def main() -> None:
    """main runs the rounds under the Slurm test lock and prints the median round's table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--jobs", type=int, default=200)
    parser.add_argument("--seconds", type=float, default=1.0, help="how long each job sleeps")
    parser.add_argument("--period", type=float, default=0.5, help="daemon period (s)")
    parser.add_argument("--rounds", type=int, default=1, help="plain/metasched pairs to run (median reported)")
    parser.add_argument(
        "--db", default=None, help="scratch PostgreSQL URL (schema is dropped!); default SQLite"
    )
    parser.add_argument("--json", action="store_true")
    args = parser.parse_args()
    if args.rounds < 1 or args.jobs < 1:
        parser.error("--rounds and --jobs must be at least 1")
    result = run_rounds(args)
    if args.json:
        print(json.dumps(result, indent=2))
        return
    print(markdown(result))
    if result["rounds"] > 1:
        ratios = ", ".join(f"{r:.2f}" for r in result["round_ratios"])
        print(f"\nmakespan ratio per round: {ratios}; median {result['median_ratio']:.2f} (the table above)")


if __name__ == "__main__":
    main()
