"""Shared pieces of the fault suite: the profile, its reports, job specs and the inference output checks.

The daemon itself (``ServeProcess``, the in-process ``DaemonHarness``), the waits and the Slurm
checks (I1–I6, duplicates) are the one harness of every real-Slurm suite: ``tests/harness.py``.

The profile (``METASCHED_FAULT_PROFILE``) only changes how many trials each scenario runs:
``short`` (the default, what CI runs) keeps the whole suite well under 8 minutes, ``long`` is
what ``deploy/fault-suite`` runs. Every scenario prints one ``FAULTS`` line with its counts and,
when ``METASCHED_FAULT_REPORT`` names a file, appends the same numbers there as JSON.
"""

from __future__ import annotations

import json
import math
import os
import subprocess
import sys
import time
import zlib
from collections.abc import Callable, Iterable
from pathlib import Path

from meta.model.states import AttemptState
from meta.service.api import Service
from tests.conftest import pg_url

REPO = Path(__file__).resolve().parents[2]


def profile() -> str:
    """profile is ``short`` (default) or ``long``."""
    value = os.environ.get("METASCHED_FAULT_PROFILE", "short").strip().lower() or "short"
    if value not in ("short", "long"):
        raise ValueError(f"METASCHED_FAULT_PROFILE must be short or long, not {value!r}")
    return value


def trials(short: int, long: int) -> int:
    """trials is the number of trials a scenario runs in the current profile."""
    return long if profile() == "long" else short


def seed_of(name: str) -> int:
    """seed_of is the random seed of a scenario: ``METASCHED_FAULT_SEED`` replays a run.

    The short profile (CI's) takes a fixed seed per scenario, as the fuzz suite's short profile
    is derandomized: every CI run kills, restarts and scancels at the same drawn moments, so a
    failure there replays rather than being one draw in many; the long profile explores.
    """
    raw = os.environ.get("METASCHED_FAULT_SEED")
    if raw:
        return int(raw)
    if profile() == "short":
        return zlib.crc32(name.encode()) % 1_000_000
    return time.time_ns() % 1_000_000


def percentile(values: Iterable[float], p: float) -> float | None:
    """percentile is the nearest-rank percentile (None for no values)."""
    data = sorted(values)
    if not data:
        return None
    rank = max(1, math.ceil(p / 100.0 * len(data)))
    return data[rank - 1]


def report(scenario: str, **counts: object) -> dict[str, object]:
    """report prints one summary line for a scenario (and appends it to $METASCHED_FAULT_REPORT)."""
    line: dict[str, object] = {"scenario": scenario, "profile": profile()}
    for key, value in counts.items():
        if isinstance(value, list | tuple) and key.endswith("_s"):
            values = [float(v) for v in value]
            line[f"{key[:-2]}_p50_s"] = _round(percentile(values, 50))
            line[f"{key[:-2]}_p99_s"] = _round(percentile(values, 99))
            line[f"{key[:-2]}_n"] = len(values)
        else:
            line[key] = _round(value) if isinstance(value, float) else value
    print("\nFAULTS " + " ".join(f"{k}={v}" for k, v in line.items()), flush=True)
    target = os.environ.get("METASCHED_FAULT_REPORT")
    if target:
        with open(target, "a", encoding="utf-8") as handle:
            handle.write(json.dumps(line) + "\n")
    return line


def _round(value: float | None) -> float | None:
    return None if value is None else round(value, 2)


def small_eval(name: str, tenant: str = "tenant-a", command: str = "sleep 2") -> dict[str, object]:
    """small_eval is a 1-CPU evaluation job that fits anywhere."""
    return {
        "kind": "evaluation",
        "name": name,
        "tenant": tenant,
        "resources": {"cpus": 1, "memory": "1G"},
        "time_limit": "5m",
        "command": command,
    }


def inference(
    name: str, output: Path, partitions: int, command: str, tenant: str = "tenant-b"
) -> dict[str, object]:
    """inference is a CPU-only batch inference job of ``partitions`` partitions writing to ``output``."""
    return {
        "kind": "inference",
        "name": name,
        "tenant": tenant,
        "partitions": partitions,
        "resources": {"cpus": 1, "memory": "1G"},
        "output": str(output),
        "time_limit": "5m",
        "retry": {"max_attempts": 5, "backoff": 0},
        "command": command,
    }


# --- inference outputs ------------------------------------------------------------------------


def metasched(
    *args: str, env: dict[str, str] | None = None, timeout: float = 60
) -> subprocess.CompletedProcess[str]:
    """metasched runs the CLI against the test store (``--db``) and returns the completed process."""
    argv = [sys.executable, "-c", "from cli.main import main; main()", "--db", pg_url(), *args]
    return subprocess.run(
        argv, cwd=REPO, capture_output=True, text=True, timeout=timeout, env=dict(os.environ, **(env or {}))
    )


def outputs_of(job: str) -> dict[str, object]:
    """outputs_of is ``metasched outputs JOB --json``."""
    done = metasched("outputs", job, "--json")
    assert done.returncode == 0, done.stderr
    return json.loads(done.stdout)


def output_problems(
    service: Service, job: str, partitions: int, read: Callable[[str], dict[str, object]] = outputs_of
) -> list[str]:
    """output_problems checks one visible output per partition, from its final attempt, checksums matching.

    ``read`` gives a job's manifest: ``metasched outputs JOB --json`` on the test store by default.
    """
    import hashlib

    manifest = read(job)
    problems = []
    parts = manifest["partitions"]
    if len(parts) != partitions:
        problems.append(f"{job}: {len(parts)} partitions in the manifest, expected {partitions}")
    final = {t.name: t.attempts[-1] for t in service.status(job).tasks}
    for part in parts:
        name = part["name"]
        if not part["attempt"]:
            problems.append(f"{job}/{name}: no committed output")
            continue
        last = final.get(name)
        if last is None or part["attempt"] != last.id or last.state != AttemptState.SUCCEEDED:
            problems.append(
                f"{job}/{name}: committed by {part['attempt']}, final attempt is {last and last.id}"
            )
        if last is not None and part["fencing_token"] != last.fencing_token:
            problems.append(f"{job}/{name}: committed token {part['fencing_token']} != {last.fencing_token}")
        root = Path(part["manifest"]["root"])
        if not part["manifest"]["files"]:
            problems.append(f"{job}/{name}: empty manifest")
        for entry in part["manifest"]["files"]:
            path = root / entry["path"]
            if not path.is_file():
                problems.append(f"{job}/{name}: {path} is missing")
                continue
            digest = hashlib.sha256(path.read_bytes()).hexdigest()
            if digest != entry["sha256"] or path.stat().st_size != entry["size"]:
                problems.append(f"{job}/{name}: {path} does not match its manifest checksum")
    return problems
