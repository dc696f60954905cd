"""CommandRunner runs Slurm CLIs as argv lists with timeouts and turns failures into typed errors.

Never a shell: every argument is one argv element, so user strings cannot become commands.
Each call is timed and reported to the observer (and to the built-in per-command counter).
"""

from __future__ import annotations

import logging
import os
import shutil
import signal
import subprocess
import time
from collections.abc import Callable, Mapping, Sequence
from dataclasses import dataclass
from typing import TypeVar

from slurm_bridge.call_records import CallCounter, CallObserver, CallOutcome, CallRecord
from slurm_bridge.classify import classify_message, first_error_line
from slurm_bridge.errors import (
    SlurmError,
    SlurmFailed,
    SlurmRejected,
    SlurmTransient,
    SlurmUnknownOutcome,
)

log = logging.getLogger(__name__)
T = TypeVar("T")

DEFAULT_TIMEOUT_S = 30.0

# Environment variables that silently change what the CLIs do or print (SBATCH_ACCOUNT,
# SQUEUE_FORMAT, SACCT_FORMAT, ...). The runner drops them so that output stays parseable and
# options come only from the argv. SLURM_CONF is kept: it says which cluster to talk to.
_DROPPED_ENV_PREFIXES = ("SBATCH_", "SQUEUE_", "SINFO_", "SACCT_", "SCANCEL_", "SCONTROL_", "SALLOC_")

_ERROR_TYPES: dict[CallOutcome, type[SlurmError]] = {
    CallOutcome.REJECTED: SlurmRejected,
    CallOutcome.TRANSIENT: SlurmTransient,
    CallOutcome.UNKNOWN: SlurmUnknownOutcome,
    CallOutcome.FAILED: SlurmFailed,
}


@dataclass(frozen=True, slots=True)
class CommandResult:
    """CommandResult is a successful call's output."""

    argv: tuple[str, ...]
    returncode: int
    stdout: str
    stderr: str
    latency_s: float


def clean_env(env: Mapping[str, str]) -> dict[str, str]:
    """clean_env drops the CLI-specific variables that would change Slurm's behaviour or output."""
    return {k: v for k, v in env.items() if not k.startswith(_DROPPED_ENV_PREFIXES)}


# the commands that take -M/--clusters (sacctmgr does not: slurmdbd serves every cluster)
CLUSTER_COMMANDS = frozenset({"sbatch", "scancel", "scontrol", "squeue", "sinfo", "sacct", "sdiag"})


class CommandRunner:
    """CommandRunner executes Slurm commands by name (``sbatch``) through configurable binaries."""

    def __init__(
        self,
        *,
        binaries: Mapping[str, Sequence[str]] | None = None,
        bin_dir: str | None = None,
        observer: CallObserver | None = None,
        default_timeout_s: float = DEFAULT_TIMEOUT_S,
        env: Mapping[str, str] | None = None,
        clock: Callable[[], float] = time.monotonic,
        cluster: str | None = None,
    ) -> None:
        # cluster: every command that takes -M asks that cluster (Slurm finds its controller through
        # slurmdbd), so a cluster of the site needs no slurm.conf of its own on the daemon's host
        self._cluster = cluster
        # binaries maps a command name to an argv prefix, e.g. {"sbatch": ["/opt/slurm/bin/sbatch"]}
        # or a fake for tests: {"sbatch": ["sh", "-c", "echo 42", "sbatch"]}.
        self._binaries = {name: tuple(prefix) for name, prefix in (binaries or {}).items()}
        self._bin_dir = bin_dir
        self._observer = observer
        self._default_timeout_s = default_timeout_s
        self._env = clean_env(os.environ if env is None else env)
        self._clock = clock
        self.counter = CallCounter()

    @property
    def env(self) -> dict[str, str]:
        """env is a copy of the environment commands run in (the daemon's, without Slurm's input variables)."""
        return dict(self._env)

    def argv_for(self, command: str, args: Sequence[str]) -> list[str]:
        """argv_for is the full argv that runs ``command`` with ``args``."""
        if command in self._binaries:
            prefix = list(self._binaries[command])
        elif self._bin_dir:
            prefix = [os.path.join(self._bin_dir, command)]
        else:
            prefix = [command]
        if self._cluster and command in CLUSTER_COMMANDS:
            prefix.append(f"--clusters={self._cluster}")
        return prefix + [str(arg) for arg in args]

    def run(
        self,
        command: str,
        args: Sequence[str],
        *,
        timeout_s: float | None = None,
        stdin: str | None = None,
        mutating: bool = False,
        env: Mapping[str, str] | None = None,
    ) -> CommandResult:
        """run executes one command (in ``env`` when given, cleaned like the runner's own); its output or a typed SlurmError."""
        return self._call(command, args, timeout_s, stdin, mutating, None, env)[0]

    def run_parsed(
        self, command: str, args: Sequence[str], parse: Callable[[str], T], *, timeout_s: float | None = None
    ) -> T:
        """run_parsed runs a read and parses stdout; a parse failure is the outcome the observer sees.

        ``sinfo --json`` exits 0 when the controller is down and only the parser notices, so
        the call must not be counted as "ok".
        """
        return self._call(command, args, timeout_s, None, False, parse)[1]

    def _call(
        self,
        command: str,
        args: Sequence[str],
        timeout_s: float | None,
        stdin: str | None,
        mutating: bool,
        parse: Callable[[str], T] | None,
        env: Mapping[str, str] | None = None,
    ) -> tuple[CommandResult, T | None]:
        """_call runs, classifies, optionally parses, and reports exactly once."""
        argv = self.argv_for(command, args)
        start = self._clock()
        try:
            returncode, stdout, stderr = _execute(
                command, argv, stdin, timeout_s or self._default_timeout_s,
                self._env if env is None else clean_env(env), mutating,
            )
            if returncode != 0:
                raise _failure(command, argv, returncode, stdout, stderr, mutating)
            parsed = parse(stdout) if parse is not None else None
        except SlurmError as error:
            self._report(command, argv, start, _outcome_of(error), error.returncode)
            raise
        latency = self._report(command, argv, start, CallOutcome.OK, returncode)
        return CommandResult(tuple(argv), returncode, stdout, stderr, latency), parsed

    def _report(
        self, command: str, argv: Sequence[str], start: float, outcome: CallOutcome, returncode: int | None
    ) -> float:
        """_report sends one CallRecord to the counter and the observer; returns the latency."""
        latency = max(0.0, self._clock() - start)
        record = CallRecord(command, tuple(argv), latency, outcome, returncode)
        self.counter.record(record)
        if self._observer is not None:
            try:
                self._observer.record(record)
            except Exception:  # a broken metrics hook must not fail a Slurm call
                log.exception("call observer failed for %s", command)
        return latency


def _execute(
    command: str, argv: list[str], stdin: str | None, timeout_s: float, env: dict[str, str], mutating: bool
) -> tuple[int, str, str]:
    """_execute runs argv in its own process group and kills the whole group on timeout.

    The command also carries its own deadline (coreutils ``timeout -s KILL``): if this process
    dies (kill -9 of the daemon), a slow sbatch cannot land minutes later, after the reconciler
    has declared the launch absent and submitted the attempt again.
    """
    if stdin is not None:
        try:
            stdin.encode("utf-8")
        except UnicodeEncodeError as error:
            # checked before the process starts: it would otherwise read an empty script
            raise SlurmRejected(f"{command}: its input is not valid UTF-8 ({error.reason} at {error.start})",
                                command=command, argv=argv) from None
    try:
        proc = subprocess.Popen(
            _with_deadline(argv, timeout_s),
            stdin=subprocess.PIPE if stdin is not None else subprocess.DEVNULL,
            stdout=subprocess.PIPE,
            stderr=subprocess.PIPE,
            text=True,
            env=env,
            start_new_session=True,  # so that a timeout kills grandchildren too
        )
    except OSError as error:
        # The request was never sent, so this is not an unknown outcome.
        raise SlurmFailed(f"cannot run {command} ({argv[0]}): {error}", command=command, argv=argv) from error
    try:
        stdout, stderr = proc.communicate(stdin, timeout=timeout_s)
    except subprocess.TimeoutExpired:
        _kill_group(proc)
        proc.communicate()
        # A timed-out write may have been applied; a timed-out read is simply retried.
        error_type = SlurmUnknownOutcome if mutating else SlurmTransient
        raise error_type(f"{command} timed out after {timeout_s:g}s", command=command, argv=argv) from None
    return proc.returncode, stdout, stderr


def _with_deadline(argv: list[str], timeout_s: float) -> list[str]:
    """_with_deadline prefixes argv with ``timeout -s KILL`` a little past our own timeout."""
    wrapper = shutil.which("timeout")
    if wrapper is None or shutil.which(argv[0]) is None:
        return argv  # a missing binary then fails in Popen itself: plainly "cannot run"
    return [wrapper, "-s", "KILL", f"{timeout_s + 1.0:g}", *argv]


def _kill_group(proc: subprocess.Popen[str]) -> None:
    """_kill_group kills the process group started for one command."""
    try:
        os.killpg(proc.pid, signal.SIGKILL)
    except ProcessLookupError:
        pass


def _outcome_of(error: SlurmError) -> CallOutcome:
    """_outcome_of maps an error type back to the outcome it stands for."""
    for outcome, error_type in _ERROR_TYPES.items():
        if isinstance(error, error_type):
            return outcome
    return CallOutcome.FAILED


def _failure(
    command: str, argv: list[str], returncode: int, stdout: str, stderr: str, mutating: bool
) -> SlurmError:
    """_failure builds the typed error for a non-zero exit or a death by signal."""
    if returncode < 0:
        # Killed by a signal: a mutating request may already have reached the controller.
        outcome = CallOutcome.UNKNOWN if mutating else CallOutcome.TRANSIENT
        message = f"{command} killed by signal {-returncode}"
    else:
        text = f"{stderr}\n{stdout}"
        outcome = classify_message(text, mutating=mutating)
        message = f"{command} exited {returncode}: {first_error_line(text) or 'no output'}"
    return _ERROR_TYPES[outcome](message, command=command, argv=argv, returncode=returncode, stderr=stderr)
