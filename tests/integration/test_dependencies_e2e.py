"""--dependency, --kill-on-invalid-dep, --hold/release and --begin end to end on the dev cluster, side by side with sbatch (issue 13).

One real ``metasched serve`` on PostgreSQL; alice submits with the installed msbatch and, for the
same pipeline, with plain sbatch. Checked for both: the chain A → afterok B → afterany C runs in
order (sacct start and end times), an afternotok on a job that succeeded is never satisfied
(reason DependencyNeverSatisfied; with --kill-on-invalid-dep=yes the job is cancelled), two
singleton jobs of one name never overlap, a held job waits with JobHeldUser until alice releases
it, a --begin=now+20 job waits with BeginTime and starts no earlier. msqueue's REASON column says
what squeue's says for the same situation. The figures printed (how long after its dependency a
job started) are docs/sbatch.md's.
"""

from __future__ import annotations

import subprocess
import time
from collections.abc import Callable
from datetime import datetime
from pathlib import Path

import pytest

from meta.model.states import JobState
from meta.store import audit
from tests.identity.conftest import installed_cli, shared_folder  # noqa: F401 - fixtures
from tests.identity.test_jobs_as_users import Serve, alice_dir, serve  # noqa: F401 - fixtures
from tests.identity.users import Call, Outcome, run_one

pytestmark = pytest.mark.slurm
ENDED = {JobState.SUCCEEDED, JobState.FAILED, JobState.CANCELLED}
BEGIN_S = 20


def as_alice(served: Serve, cwd: Path, prog: str, *args: str) -> Outcome:
    return run_one(Call("alice", tuple(args), prog=prog), served.api, cwd)


def slurm(*argv: str) -> str:
    done = subprocess.run(["runuser", "-u", "alice", "--", *argv], capture_output=True, text=True, timeout=60)
    assert done.returncode == 0, done.stderr
    return done.stdout.strip()


def wait_for(what: str, done: Callable[[], object], timeout_s: float = 180) -> object:
    deadline = time.monotonic() + timeout_s
    while not (value := done()):
        assert time.monotonic() < deadline, f"timed out waiting for {what}"
        time.sleep(0.5)
    return value


def ms(served: Serve, cwd: Path, *args: str) -> str:
    out = as_alice(served, cwd, "msbatch", "--parsable", "-A", "tenant-a", "-t", "5", *args)
    assert out.code == 0, out.stderr
    return out.stdout.strip()


def sb(*args: str) -> str:
    return slurm("sbatch", "--parsable", "-A", "tenant-a", "-t", "5", "-o", "/dev/null", *args)


def ms_reason(served: Serve, cwd: Path, job: str) -> str:
    return as_alice(served, cwd, "msqueue", "-h", "-j", job, "-o", "%R").stdout.strip()


def sq_reason(job: str) -> str:
    return slurm("squeue", "-h", "-j", job, "-o", "%R")


def times(slurm_id: str) -> tuple[datetime, datetime, str]:
    """times is a Slurm job's start, end and state from sacct (local times; the cluster has one clock)."""
    line = subprocess.run(["sacct", "-n", "-X", "-P", "-j", slurm_id, "-o", "Start,End,State"], capture_output=True,
                          text=True, timeout=60).stdout.strip().splitlines()[0]  # fmt: skip
    start, end, state = line.split("|")
    return datetime.fromisoformat(start), datetime.fromisoformat(end), state


def slurm_ids(served: Serve, job: str) -> list[str]:
    status = served.service.status(job)
    return [a.slurm_job_id for t in status.tasks for a in t.attempts if a.slurm_job_id]


def done(served: Serve, job: str) -> bool:
    return served.service.status(job).state in ENDED


def sacct_state(slurm_id: str) -> str:
    return subprocess.run(["sacct", "-n", "-X", "-P", "-j", slurm_id, "-o", "State"], capture_output=True,
                          text=True, timeout=60).stdout.strip()  # fmt: skip


def sacct_done(slurm_id: str) -> bool:
    return sacct_state(slurm_id).startswith(("COMPLETED", "FAILED", "CANCELLED", "TIMEOUT"))


def gap(first: str, then: str) -> float:
    """gap is how long after ``first`` ended ``then`` started (seconds; ≥ 0 when the order held)."""
    return (times(then)[0] - times(first)[1]).total_seconds()


def test_dependencies_holds_and_begin_times_side_by_side_with_sbatch(serve: Serve, alice_dir: Path) -> None:  # noqa: F811
    submitted = time.time()
    a = ms(serve, alice_dir, "-J", "dep-a", "--wrap", "sleep 12")
    b = ms(serve, alice_dir, "-J", "dep-b", f"--dependency=afterok:{a}", "--wrap", "sleep 3")
    c = ms(serve, alice_dir, "-J", "dep-c", "-d", f"afterany:{b}", "--wrap", "true")
    never = ms(serve, alice_dir, "-J", "dep-d", f"--dependency=afternotok:{a}", "--wrap", "true")
    killed = ms(serve, alice_dir, "-J", "dep-e", f"--dependency=afternotok:{a}", "--kill-on-invalid-dep=yes",
                "--wrap", "true")  # fmt: skip
    solo = [ms(serve, alice_dir, "-J", "dep-solo", "--dependency=singleton", "--wrap", "sleep 12") for _ in range(2)]
    held = ms(serve, alice_dir, "-J", "dep-held", "-H", "--wrap", "true")
    later = ms(serve, alice_dir, "-J", "dep-later", f"--begin=now+{BEGIN_S}", "--wrap", "true")

    pa = sb("-J", "p-a", "--wrap", "sleep 12")
    pb = sb("-J", "p-b", f"--dependency=afterok:{pa}", "--wrap", "sleep 3")
    pc = sb("-J", "p-c", "-d", f"afterany:{pb}", "--wrap", "true")
    pnever = sb("-J", "p-d", f"--dependency=afternotok:{pa}", "--wrap", "true")
    pkilled = sb("-J", "p-e", f"--dependency=afternotok:{pa}", "--kill-on-invalid-dep=yes", "--wrap", "true")
    psolo = [sb("-J", "p-solo", "--dependency=singleton", "--wrap", "sleep 12") for _ in range(2)]
    pheld = sb("-J", "p-held", "-H", "--wrap", "true")
    plater = sb("-J", "p-later", f"--begin=now+{BEGIN_S}", "--wrap", "true")
    try:
        # while A and the first singleton run: the same reasons in msqueue and squeue
        for mine, theirs, reason in ((solo[1], psolo[1], "(Dependency)"), (b, pb, "(Dependency)"),
                                     (held, pheld, "(JobHeldUser)"), (later, plater, "(BeginTime)")):  # fmt: skip
            seen: list[str] = []
            try:
                wait_for(f"msqueue to show {reason} for {mine}",
                         lambda m=mine, r=reason, log=seen: log.append(ms_reason(serve, alice_dir, m)) or log[-1] == r,
                         timeout_s=60)  # fmt: skip
            except AssertionError as exc:
                raise AssertionError(f"{exc}; msqueue said {seen[-3:]}; {serve.why(mine)}") from None
            assert sq_reason(theirs) == reason
        explained = as_alice(serve, alice_dir, "metasched", "explain", b, "--json")
        assert explained.code == 0 and explained.json()["tasks"][0]["code"] == "Dependency"  # type: ignore[index]

        for job in (c, later, solo[1], killed):
            wait_for(f"{job} to end", lambda j=job: done(serve, j))
        for job in (pc, plater, psolo[1]):
            wait_for(f"sbatch {job} to end", lambda j=job: sacct_done(j))
        (sa,), (sb_,), (sc,) = slurm_ids(serve, a), slurm_ids(serve, b), slurm_ids(serve, c)
        figures = {
            "msbatch afterok gap": gap(sa, sb_), "msbatch afterany gap": gap(sb_, sc),
            "sbatch afterok gap": gap(pa, pb), "sbatch afterany gap": gap(pb, pc),
            "msbatch singleton gap": gap(slurm_ids(serve, solo[0])[0], slurm_ids(serve, solo[1])[0]),
            "sbatch singleton gap": gap(psolo[0], psolo[1]),
            "msbatch begin": (times(slurm_ids(serve, later)[0])[0].timestamp() - submitted),
            "sbatch begin": (times(plater)[0].timestamp() - submitted),
        }
        print("\nstart after the dependency ended (s):", {k: round(v, 1) for k, v in figures.items()})
        assert all(figures[k] >= 0 for k in figures if "gap" in k), figures
        assert figures["msbatch begin"] >= BEGIN_S - 1 and figures["sbatch begin"] >= BEGIN_S - 1
        assert [times(x)[2] for x in (sa, sb_, sc)] == ["COMPLETED"] * 3
        assert [times(x)[2] for x in (pa, pb, pc)] == ["COMPLETED"] * 3

        # afternotok on a job that succeeded: never satisfied; cancelled only when asked
        wait_for("DependencyNeverSatisfied", lambda: ms_reason(serve, alice_dir, never) == "(DependencyNeverSatisfied)")
        wait_for("sbatch's DependencyNeverSatisfied", lambda: sq_reason(pnever) == "(DependencyNeverSatisfied)")
        assert serve.service.status(killed).state == JobState.CANCELLED and slurm_ids(serve, killed) == []
        wait_for("sbatch's kill-on-invalid-dep", lambda: sacct_done(pkilled))
        assert sacct_state(pkilled).startswith("CANCELLED")
        with serve.service.db.session() as session:
            lines = [e for e in audit.read(session) if e.action == "job.cancel" and e.subject == killed]
        assert [e.actor for e in lines] == ["scheduler"]

        # the held job waited all along; alice releases it and it runs
        assert serve.service.status(held).state == JobState.PENDING and slurm_ids(serve, held) == []
        released = as_alice(serve, alice_dir, "metasched", "release", held)
        assert released.code == 0, released.stderr
        slurm("scontrol", "release", pheld)
        wait_for("the released job to end", lambda: done(serve, held))
        wait_for("sbatch's released job to end", lambda: sacct_done(pheld))
        assert serve.service.status(held).state == JobState.SUCCEEDED
    finally:
        for job in (never, held):
            as_alice(serve, alice_dir, "metasched", "cancel", job)
        subprocess.run(["scancel", pa, pb, pc, pnever, pkilled, *psolo, pheld, plater], capture_output=True, timeout=30)
