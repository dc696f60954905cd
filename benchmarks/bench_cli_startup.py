"""bench_cli_startup: the CPU time (user + sys) a CLI command costs, as users run it.

Usage (from the repo root, as root on the dev machine: MUNGE and sacctmgr are real)::

    python benchmarks/bench_cli_startup.py              # 15 runs per command, 50 jobs listed
    python benchmarks/bench_cli_startup.py --runs 31 --jobs 200 --json

It starts ``metasched serve`` on a temporary SQLite store with its API on a temporary Unix socket
(its Slurm bin folder holds only ``sacctmgr`` and ``scontrol``, for the associations: the cycle
cannot launch anything on the shared cluster), submits ``--jobs`` jobs through the API, then runs
each command ``--runs`` times and reports the median CPU time of the child (``getrusage
(RUSAGE_CHILDREN)`` before and after each run) and its wall time. The commands are the console
scripts next to this interpreter (what ``pip install`` made; a pyenv shim in front of them adds
its own ~0.1 s). ``metasched --db URL list`` is the direct-to-store path every command took before
the API: the figure the thin client is compared with. Not a timed test: figures only.
"""

from __future__ import annotations

import argparse
import http.client
import json
import os
import resource
import shutil
import signal
import socket
import statistics
import subprocess
import sys
import sysconfig
import tempfile
import time
from dataclasses import asdict, dataclass
from pathlib import Path

REPO = Path(__file__).resolve().parents[1]
BUDGET_S = 0.3  # issue 12: metasched --version and metasched list start within 0.3 s of CPU
SCRIPT = "#!/bin/bash\n#SBATCH -A tenant-a\n#SBATCH -N 1\n#SBATCH --gres=gpu:a100:1\nhostname\n"


@dataclass(frozen=True)
class Figure:
    """Figure is one command's CPU and wall time over its runs (seconds)."""

    command: str
    runs: int
    cpu_median_s: float
    cpu_min_s: float
    cpu_max_s: float
    wall_median_s: float
    budget_s: float | None


def scripts_dir() -> Path:
    """scripts_dir is where this interpreter's console scripts are (not a shim's folder)."""
    return Path(sysconfig.get_path("scripts"))


def command(name: str) -> list[str]:
    """command is the installed console script, else the same entry point through this interpreter."""
    path = scripts_dir() / name
    if path.exists():
        return [str(path)]
    module = "cli.main" if name == "metasched" else "cli.sbatch.msbatch"
    return [sys.executable, "-c", f"from {module} import main; main()"]


def measure(argv: list[str], env: dict[str, str], runs: int) -> tuple[list[float], list[float]]:
    """measure runs ``argv`` ``runs`` times; CPU (user + sys of the child) and wall time of each run."""
    cpu, wall = [], []
    for _ in range(runs):
        before = resource.getrusage(resource.RUSAGE_CHILDREN)
        started = time.perf_counter()
        done = subprocess.run(argv, env=env, cwd=REPO, capture_output=True, timeout=60)
        wall.append(time.perf_counter() - started)
        after = resource.getrusage(resource.RUSAGE_CHILDREN)
        if done.returncode != 0:
            raise SystemExit(f"{' '.join(argv)} failed ({done.returncode}): {done.stderr.decode()[:500]}")
        cpu.append((after.ru_utime - before.ru_utime) + (after.ru_stime - before.ru_stime))
    return cpu, wall


def slurm_bin(folder: Path) -> Path:
    """slurm_bin is a Slurm folder with only the association reads: the daemon's cycle finds no sbatch."""
    folder.mkdir()
    for tool in ("sacctmgr", "scontrol"):
        found = shutil.which(tool)
        if found is None:
            raise SystemExit(f"{tool} not found: the API's authorization reads Slurm's associations")
        (folder / tool).symlink_to(found)
    return folder


def start_serve(work: Path, store: str) -> tuple[subprocess.Popen[bytes], str]:
    """start_serve runs ``metasched serve`` with its API on a socket in ``work``; returns it and the address."""
    sock = work / "api.sock"
    argv = command("metasched") + [
        "--db", store, "serve", "--state-dir", str(work / "state"), "--api-socket", str(sock),
        "--api-listen", "off", "--metrics-port", "0", "--period", "30", "--log-level", "WARNING",
        "--slurm-bin-dir", str(slurm_bin(work / "bin")),
    ]  # fmt: skip
    log = (work / "serve.log").open("wb")
    proc = subprocess.Popen(argv, cwd=REPO, stdout=log, stderr=subprocess.STDOUT)
    deadline = time.monotonic() + 30
    while time.monotonic() < deadline:
        if proc.poll() is not None:
            raise SystemExit(f"metasched serve exited: {(work / 'serve.log').read_text()[-2000:]}")
        if sock.exists() and _healthy(sock):
            return proc, f"unix://{sock}"
        time.sleep(0.1)
    proc.kill()
    raise SystemExit("metasched serve did not start its API within 30 s")


def _healthy(path: Path) -> bool:
    connection = http.client.HTTPConnection("localhost", timeout=2)
    connection.sock = socket.socket(socket.AF_UNIX, socket.SOCK_STREAM)
    try:
        connection.sock.connect(str(path))
        connection.request("GET", "/healthz")
        return connection.getresponse().status == 200
    except OSError:
        return False
    finally:
        connection.close()


def run(runs: int, jobs: int) -> list[Figure]:
    """run measures every command against a fresh daemon and store."""
    work = Path(tempfile.mkdtemp(prefix="bench-cli-"))
    store = f"sqlite:///{work / 'store.sqlite'}"
    proc, address = start_serve(work, store)
    try:
        env = {k: v for k, v in os.environ.items() if not k.startswith(("METASCHED_", "SBATCH_"))}
        env["METASCHED_API"] = address
        script = work / "job.sh"
        script.write_text(SCRIPT)
        for _ in range(jobs):
            subprocess.run(command("msbatch") + ["--parsable", str(script)], env=env, check=True, capture_output=True)
        listed = subprocess.run(command("metasched") + ["list", "--json"], env=env, check=True, capture_output=True)
        assert len(json.loads(listed.stdout)) == jobs
        cases: list[tuple[str, list[str], dict[str, str], float | None]] = [
            ("metasched --version", command("metasched") + ["--version"], env, BUDGET_S),
            (f"metasched list ({jobs} jobs, API)", command("metasched") + ["list"], env, BUDGET_S),
            ("msbatch --test-only job.sh", command("msbatch") + ["--test-only", str(script)], env, None),
            ("msbatch job.sh (submit, API)", command("msbatch") + [str(script)], env, None),
            (f"metasched --db URL list ({jobs} jobs, local mode)",
             command("metasched") + ["--db", store, "list"], env, None),
        ]
        figures = []
        for label, argv, environ, budget in cases:
            cpu, wall = measure(argv, environ, runs)
            figures.append(Figure(label, runs, statistics.median(cpu), min(cpu), max(cpu),
                                  statistics.median(wall), budget))
        return figures
    finally:
        proc.send_signal(signal.SIGTERM)
        try:
            proc.wait(timeout=30)
        except subprocess.TimeoutExpired:
            proc.kill()
        shutil.rmtree(work, ignore_errors=True)


def table(figures: list[Figure]) -> str:
    """table renders the figures as a Markdown table."""
    lines = ["| command | CPU median (s) | min / max | wall median (s) | budget |", "|---|---:|---:|---:|---|"]
    for f in figures:
        budget = "–" if f.budget_s is None else f"≤ {f.budget_s} {'met' if f.cpu_median_s <= f.budget_s else 'MISSED'}"
        lines.append(f"| `{f.command}` | {f.cpu_median_s:.3f} | {f.cpu_min_s:.3f} / {f.cpu_max_s:.3f} | "
                     f"{f.wall_median_s:.3f} | {budget} |")
    return "\n".join(lines)


def main() -> None:
    """main parses the options, measures and prints the table (or JSON)."""
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--runs", type=int, default=15, help="runs per command (the median is reported)")
    parser.add_argument("--jobs", type=int, default=50, help="jobs in the store that `list` shows")
    parser.add_argument("--json", action="store_true", help="print JSON instead of a table")
    args = parser.parse_args()
    figures = run(args.runs, args.jobs)
    if args.json:
        print(json.dumps([asdict(f) for f in figures], indent=2))
        return
    print(f"console scripts: {scripts_dir()}; {args.runs} runs each; CPU = user + sys of the child")
    print(table(figures))


if __name__ == "__main__":
    main()
