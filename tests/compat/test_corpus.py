"""The golden compatibility corpus: every script of tests/compat/scripts runs once through plain sbatch and once through msbatch.

On the dev cluster with one real ``metasched serve`` (PostgreSQL), as alice with the installed
CLI, each script is submitted from its own folder in alice's home (a ``data/`` folder with an
input file and two log files beside it, the submitting shell's ``FOO`` and ``OTHER`` set), all
at once. When every job has ended the test compares what each job saw and left behind:

- the files in its folder (names and contents, with the job's own Slurm id(s) and the folder
  written as placeholders): output and error files from ``-o/-e`` patterns and sbatch's default,
  what the script wrote, the working folder it recorded;
- the ``SLURM_*`` variables it recorded, except INTENDED (docs/sbatch.md, "Intended differences from
  sbatch": ids and placement that differ between any two runs);
- its end in accounting (sacct State and ExitCode of the allocation; for msbatch, its last attempt;
  for an array, every element's);
- order: a script with ``# compat-after: OTHER.sh TYPE`` is submitted with
  ``--dependency=TYPE:<OTHER's id>`` (each program's own id) and must start after OTHER ended;
  ``--begin=now+N`` must start N seconds after its submit; ``# compat-release: N`` is held
  (``--hold``) and released after N seconds (``scontrol release`` / ``metasched release``) and must
  start after that.

Any other difference fails the test, naming the script and what differs.
"""

from __future__ import annotations

import re
import shlex
import shutil
import subprocess
import time
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from pathlib import Path
from secrets import token_hex

import pytest

from meta.model.states import JobState
from tests.identity.conftest import installed_cli, shared_folder  # noqa: F401 - fixtures
from tests.identity.test_jobs_as_users import Serve, serve  # noqa: F401 - fixtures
from tests.identity.users import BIN_DIR

pytestmark = pytest.mark.slurm

SCRIPTS = Path(__file__).parent / "scripts"
SUBMIT_ENV = {"FOO": "from-shell", "OTHER": "other-var"}
# SLURM_* variables that differ between any two runs of one script (docs/sbatch.md lists them)
INTENDED = frozenset({
    "SLURM_JOB_ID", "SLURM_JOBID", "SLURM_TASK_PID", "SLURM_JOB_NODELIST", "SLURM_NODELIST",
    "SLURMD_NODENAME", "SLURM_TOPOLOGY_ADDR", "SLURM_NODE_ALIASES", "SLURM_JOB_START_TIME", "SLURM_JOB_END_TIME",
    "SLURM_STEP_GPUS", "SLURM_JOB_GPUS", "CUDA_VISIBLE_DEVICES", "GPU_DEVICE_ORDINAL", "SLURM_WORKING_CLUSTER",
})  # fmt: skip
ENDED = ("COMPLETED", "FAILED", "TIMEOUT", "CANCELLED", "OUT_OF_MEMORY", "NODE_FAIL")
TIMEOUT_S = 240


@dataclass
class Run:
    """Run is one submission of one script: its folder, the id the submitter printed and the Slurm ids."""

    script: str
    folder: Path
    program: str = ""
    submitted: str = ""
    slurm_ids: list[str] = field(default_factory=list)  # the job's (every attempt's, every element's)
    last_ids: list[str] = field(default_factory=list)  # the allocation whose end counts (one per element)
    error: str = ""
    predecessor: Run | None = None  # compat-after: the run of the script it depends on
    submitted_at: float = 0.0
    released_at: float = 0.0


def _header(text: str, key: str) -> list[str]:
    found = re.search(rf"^# compat-{key}: (.*)$", text, re.M)
    return shlex.split(found.group(1)) if found else []


def _script_args(text: str) -> list[str]:
    return _header(text, "args")


def _prepare(folder: Path) -> None:
    """_prepare makes a job's folder as a user's project: data/input.txt and two existing logs."""
    (folder / "data").mkdir(parents=True)
    (folder / "data" / "input.txt").write_text("delta\nalpha\ncharlie\nbravo\n")
    (folder / "data" / "existing.log").write_text("old line\n")
    (folder / "data" / "existing2.log").write_text("old line\n")


def as_alice(argv: list[str], cwd: Path, api: str) -> subprocess.CompletedProcess[str]:
    """as_alice runs a command as alice with the submitting shell's environment."""
    env = {"PATH": f"{BIN_DIR}:/usr/bin:/bin", "HOME": "/home/alice", "LANG": "C.UTF-8", "METASCHED_API": api,
           **SUBMIT_ENV}  # fmt: skip
    command = ["runuser", "-u", "alice", "--", "env", "-i", *(f"{k}={v}" for k, v in env.items()), *argv]
    return subprocess.run(command, cwd=cwd, capture_output=True, text=True, timeout=60)


def _submit(run: Run, api: str, after: Run | None = None) -> None:
    text = (SCRIPTS / run.script).read_text()
    dependency = [f"--dependency={_header(text, 'after')[1]}:{after.submitted}"] if after else []
    run.submitted_at = time.time()
    done = as_alice([run.program, "--parsable", *dependency, run.script, *_script_args(text)], run.folder, api)
    if done.returncode:
        run.error = f"{run.program} exited {done.returncode}: {done.stderr.strip()}"
    run.submitted = done.stdout.strip().split(";")[0]


def _release_later(run: Run, api: str) -> None:
    """_release_later releases a held job after the script's compat-release seconds, as alice."""
    time.sleep(float(_header((SCRIPTS / run.script).read_text(), "release")[0]))
    release = ["scontrol", "release"] if run.program == "sbatch" else [str(BIN_DIR / "metasched"), "release"]
    run.released_at = time.time()
    done = as_alice([*release, run.submitted], run.folder, api)
    if done.returncode:
        run.error = f"release exited {done.returncode}: {done.stderr.strip()}"


def _sacct_rows(slurm_id: str) -> list[list[str]]:
    done = subprocess.run(["sacct", "-n", "-X", "-P", "-j", slurm_id, "-o", "JobIDRaw,State,ExitCode,Start,End"],
                          capture_output=True, text=True, timeout=60)  # fmt: skip
    return [line.split("|") for line in done.stdout.strip().splitlines() if line]


def _sacct(slurm_id: str) -> tuple[str, str] | None:
    """_sacct is the (State, ExitCode) of one ended allocation, None while it has not ended."""
    rows = [row for row in _sacct_rows(slurm_id) if row[0] == slurm_id]
    if not rows:
        return None
    state = rows[-1][1].split()[0] if rows[-1][1] else ""
    return (state, rows[-1][2]) if state in ENDED else None


def _times(slurm_id: str) -> tuple[float, float]:
    """_times is an allocation's (Start, End) in seconds since the epoch."""
    row = [r for r in _sacct_rows(slurm_id) if r[0] == slurm_id][-1]
    return tuple(time.mktime(time.strptime(v, "%Y-%m-%dT%H:%M:%S")) for v in row[3:5])  # type: ignore[return-value]


def _sbatch_ids(run: Run) -> tuple[list[str], list[str]] | None:
    """_sbatch_ids are a plain job's Slurm ids (an array's elements too) once all have ended, else None."""
    rows = _sacct_rows(run.submitted)
    states = [row[1].split()[0] if row[1] else "" for row in rows]
    if not rows or any(state not in ENDED for state in states):
        return None
    elements = [row[0] for row in rows]
    return [run.submitted, *[e for e in elements if e != run.submitted]], elements


def _metasched_ids(serve: Serve, run: Run) -> tuple[list[str], list[str]] | None:  # noqa: F811
    """_metasched_ids are the job's id, its attempts' Slurm ids and each task's last one, once it has ended."""
    status = serve.service.status(run.submitted)
    if status.state not in (JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED):
        return None
    every = [str(a.slurm_job_id) for t in status.tasks for a in t.attempts if a.slurm_job_id]
    last = [str(t.attempts[-1].slurm_job_id) for t in status.tasks if t.attempts and t.attempts[-1].slurm_job_id]
    if len(last) != len(status.tasks) or any(_sacct(i) is None for i in last):
        return None
    return [run.submitted, *every], last


# srun's notices that a step waited for the previous one to release the allocation: Slurm's
# timing (seen under sbatch and msbatch alike when two sruns follow each other), not semantics.
SRUN_STEP_WAIT = re.compile(
    r"^srun: (Job \d+ step creation temporarily disabled, retrying \([^)]*\)|Step created for job \d+)\n",
    re.M,
)


def _normalised(text: str, run: Run) -> str:
    """_normalised writes ids, the folder, times and (unless -w/-x chose them) nodes as placeholders.

    The job's own id (an array's: <ARRAY>), its Slurm ids (<JOBID>), the id of the job it depends
    on (<DEPID>): each run has its own. Node names in what the job printed (Slurm's own messages
    name the node) are placement, as are SLURMD_NODENAME and the node lists.
    """
    script = (SCRIPTS / run.script).read_text()
    text = SRUN_STEP_WAIT.sub("", text)
    text = text.replace(str(run.folder), "<DIR>")
    text = re.sub(r"\d{4}-\d\d-\d\dT\d\d:\d\d:\d\d", "<TIME>", text)
    if not re.search(r"^#SBATCH (-w|-x|--nodelist|--exclude)", script, re.M):
        text = re.sub(r"(?<![0-9A-Za-z])(a100|h100|t4)n[0-9]+(?![0-9A-Za-z])", "<NODE>", text)
    if run.predecessor is not None and run.predecessor.submitted:
        text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(run.predecessor.submitted)}(?![0-9A-Za-z])", "<DEPID>", text)
    array = bool(re.search(r"^#SBATCH (--array|-a)", script, re.M))
    first, *others = run.slurm_ids or [""]
    if array:
        text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(first)}(?![0-9A-Za-z])", "<ARRAY>", text)
    for slurm_id in sorted(run.slurm_ids if not array else others, key=len, reverse=True):
        text = re.sub(rf"(?<![0-9A-Za-z]){re.escape(slurm_id)}(?![0-9A-Za-z])", "<JOBID>", text)
    return text


def _seen(run: Run) -> dict[str, str]:
    """_seen is every file the job left in its folder (normalised name -> normalised content)."""
    files = {}
    for path in sorted(run.folder.rglob("*")):
        if path.is_file() and path.name != run.script:
            files[_normalised(str(path.relative_to(run.folder)), run)] = _normalised(path.read_text(errors="replace"), run)
    return files


def _env_lines(text: str) -> dict[str, str]:
    pairs = (line.partition("=") for line in text.splitlines() if "=" in line)
    return {name: value for name, _, value in pairs if name not in INTENDED}


def differences(sb: Run, ms: Run) -> list[str]:
    """differences lists what the msbatch run saw or left that the sbatch run did not, outside INTENDED."""
    if sb.error or ms.error:
        return [f"submit: sbatch {sb.error or 'ok'}; msbatch {ms.error or 'ok'}"]
    problems = []
    mine, theirs = _seen(sb), _seen(ms)
    if sorted(mine) != sorted(theirs):
        problems.append(f"files: sbatch {sorted(mine)} msbatch {sorted(theirs)}")
    for name in sorted(set(mine) & set(theirs)):
        if Path(name).name.startswith("env-"):
            want, got = _env_lines(mine[name]), _env_lines(theirs[name])
            for key in sorted(set(want) | set(got)):
                if want.get(key) != got.get(key):
                    problems.append(f"{name}: {key} sbatch={want.get(key)!r} msbatch={got.get(key)!r}")
        elif mine[name] != theirs[name]:
            problems.append(f"{name}: sbatch {mine[name][-300:]!r} msbatch {theirs[name][-300:]!r}")
    ended = (sorted(map(str, map(_sacct, sb.last_ids))), sorted(map(str, map(_sacct, ms.last_ids))))
    if ended[0] != ended[1]:
        problems.append(f"sacct State|ExitCode: sbatch {ended[0]} msbatch {ended[1]}")
    return problems + order_problems(sb) + order_problems(ms)


def order_problems(run: Run) -> list[str]:
    """order_problems checks that a job started after what it waited for: its dependency, --begin, a release."""
    text = (SCRIPTS / run.script).read_text()
    start = min(_times(i)[0] for i in run.last_ids)
    problems = []
    begin = re.search(r"^#SBATCH --begin=now\+(\d+)$", text, re.M)
    if begin and start < run.submitted_at + int(begin.group(1)) - 1:
        problems.append(f"{run.program}: started {start - run.submitted_at:.0f} s after submit, before --begin")
    if run.released_at and start < int(run.released_at):
        problems.append(f"{run.program}: started before it was released")
    if run.predecessor is not None:
        ended = max(_times(i)[1] for i in run.predecessor.last_ids)
        if start < ended:
            problems.append(f"{run.program}: started at {start} before {run.predecessor.script} ended at {ended}")
    return problems


def _wait_all(serve: Serve, runs: list[tuple[Run, Run]]) -> None:  # noqa: F811
    deadline = time.monotonic() + TIMEOUT_S
    pending = [pair for pair in runs if not (pair[0].error or pair[1].error)]
    while pending:
        assert time.monotonic() < deadline, f"still running after {TIMEOUT_S} s: {[p[0].script for p in pending]}"
        left = []
        for sb, ms in pending:
            sb_ids, ms_ids = _sbatch_ids(sb), _metasched_ids(serve, ms)
            if sb_ids is None or ms_ids is None:
                left.append((sb, ms))
                continue
            (sb.slurm_ids, sb.last_ids), (ms.slurm_ids, ms.last_ids) = sb_ids, ms_ids
        pending = left
        time.sleep(2)


def submit_all(runs: list[tuple[Run, Run]], api: str) -> None:
    """submit_all submits every script through both programs at once; dependents once their predecessor has an id."""
    by_name = {sb.script: (sb, ms) for sb, ms in runs}
    first = [run for pair in runs for run in pair if not _header((SCRIPTS / run.script).read_text(), "after")]
    with ThreadPoolExecutor(max_workers=8) as pool:
        list(pool.map(lambda run: _submit(run, api), first))
        waiting = [run for pair in runs for run in pair if run not in first]
        while waiting:
            ready = []
            for run in waiting:
                name = _header((SCRIPTS / run.script).read_text(), "after")[0]
                before = by_name[name][0 if run.program == "sbatch" else 1]
                if before.submitted or before.error:
                    run.predecessor = before
                    ready.append(run)
            assert ready, f"compat-after names a script that is not submitted first: {[r.script for r in waiting]}"
            list(pool.map(lambda run: _submit(run, api, run.predecessor), ready))
            waiting = [run for run in waiting if run not in ready]
        held = [run for pair in runs for run in pair if _header((SCRIPTS / run.script).read_text(), "release")]
        list(pool.map(lambda run: _release_later(run, api), held))


@pytest.fixture
def compat_root() -> Path:
    """compat_root is a fresh folder in alice's home for both runs of every script."""
    root = Path("/home/alice") / f"ms-compat-{token_hex(4)}"
    yield root
    shutil.rmtree(root, ignore_errors=True)


def test_every_script_sees_the_same_under_msbatch_as_under_sbatch(serve: Serve, compat_root: Path) -> None:  # noqa: F811
    scripts = sorted(p.name for p in SCRIPTS.glob("*.sh"))
    assert len(scripts) >= 30, scripts
    runs = []
    for script in scripts:
        pair = []
        for program in ("sbatch", "msbatch"):
            folder = compat_root / program / script.removesuffix(".sh")
            _prepare(folder)
            shutil.copy(SCRIPTS / script, folder / script)
            pair.append(Run(script, folder, "sbatch" if program == "sbatch" else str(BIN_DIR / "msbatch")))
        runs.append((pair[0], pair[1]))
    subprocess.run(["chown", "-R", "alice:alice", str(compat_root)], check=True, timeout=60)
    started = time.monotonic()
    submit_all(runs, serve.api)
    _wait_all(serve, runs)
    report = {sb.script: differences(sb, ms) for sb, ms in runs}
    failed = {script: problems for script, problems in report.items() if problems}
    print(f"\ncompat corpus: {len(scripts)} scripts, {len(scripts) - len(failed)} alike, "
          f"{time.monotonic() - started:.0f} s from submit to the last end")
    assert not failed, "\n".join(f"{script}: " + "\n    ".join(problems) for script, problems in failed.items())
