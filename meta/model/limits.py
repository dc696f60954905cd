"""Bounds on everything a caller can send: sizes, counts, depths, ranges and text encodings.

Every limit lives here so that the spec model, the job-file reader and the documentation agree.
They are checked before anything is parsed further or stored: a job file that breaks one is
refused with one line naming the field, and nothing of it reaches the store or the daemon.
"""

from __future__ import annotations

import re
from collections.abc import Iterator
from typing import Any

KIB = 1024
MIB = 1024 * KIB

MAX_JOB_FILE_BYTES = 1 * MIB  # a job file; long programs belong in a script file of their own
MAX_DEPTH = 16  # the deepest real spec is 4 levels (retry.on[0]); anything deeper is not a spec
MAX_ITEMS = 100_000  # items in any one list of a job file
# tasks of one job (inference partitions, array elements): a submit writes them in one transaction,
# and 20,000 keep it under a second even on a store holding millions of tasks (100,000 took 2-4 s
# there); more shards are more jobs
MAX_TASKS_PER_JOB = 20_000
# tasks one request (a job or a batch) may make: the same bound, so the store's writer is held as long
# by a batch as by the largest job (issue 22, S4: 100 jobs of 20,000 partitions held it 15.6 s)
MAX_TASKS_PER_REQUEST = MAX_TASKS_PER_JOB
MAX_KEYS = 1_024  # keys in one mapping (env's cap is lower; unknown keys are refused anyway)
MAX_NODES = 250_000  # scalars, lists and mappings in one file
MAX_COMMAND_BYTES = 64 * KIB  # a command line (ARG_MAX-sized commands are scripts)
MAX_SCRIPT_BYTES = 1 * MIB  # an inline batch script (Slurm's own default cap is 4 MB)
MAX_ENV_VARS = 256
MAX_ENV_VALUE_BYTES = 32 * KIB
MAX_SECRETS = 64
MAX_PATH_BYTES = 4_096  # PATH_MAX
MAX_SHARD_NAME_CHARS = 256
MAX_LOCALITY_NODES = 1_024
MAX_DURATION_S = 365 * 86_400.0  # a year: time limits, intervals, minimum runtimes
MAX_BACKOFF_S = 7 * 86_400.0  # a retry waits at most a week
MAX_CPUS = 100_000.0
MAX_GPUS = 1_024
MAX_STORAGE_GIB = 1024 * 1024  # 1 PiB of local scratch
MAX_MESSAGE_CHARS = 300  # one problem in an error message (values are echoed, so they are cut)

# Slurm names (partitions, QOS, GPU types, networks, node names): ASCII, no spaces, no options
_BREAKS = re.compile(r"\s*[\r\n]+\s*")
SLURM_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,63}")


def is_slurm_name(value: str) -> bool:
    """is_slurm_name tells whether ``value`` is a safe Slurm object name (the whole string)."""
    return SLURM_NAME.fullmatch(value) is not None


def text_problem(value: str) -> str | None:
    """text_problem says why a string cannot be stored or passed on (NUL, not valid UTF-8), or None."""
    if "\x00" in value:
        return "contains a NUL character"
    try:
        value.encode("utf-8")
    except UnicodeEncodeError as exc:
        return f"is not valid UTF-8 (character {exc.start})"
    return None


_CONTROL = re.compile(r"[\x00-\x1f\x7f]")


def submit_dir_problem(path: str) -> str | None:
    """submit_dir_problem says why a submit directory cannot be stored (not absolute, too long, control characters), or None."""
    if _CONTROL.search(path):
        return "contains a control character"
    problem = text_problem(path)
    if problem:
        return problem
    if len(path.encode("utf-8")) > MAX_PATH_BYTES:
        return f"is longer than {MAX_PATH_BYTES} bytes"
    if not path.startswith("/"):
        return "is not an absolute path"
    return None


def tree_problems(data: Any) -> list[str]:
    """tree_problems checks a parsed document's shape: depth, list and mapping sizes, node count, text.

    It walks without recursion, so a document nested a million levels deep is refused rather
    than crashing the caller; each problem names its field path.
    """
    problems: list[str] = []
    nodes = 0
    for path, depth, value in _walk(data):
        nodes += 1
        if nodes > MAX_NODES:
            return [f"(job): more than {MAX_NODES} values in one job file"]
        problem = _node_problem(value, depth)
        if problem:
            problems.append(f"{path or '(job)'}: {problem}")
            if len(problems) >= 5:
                break
    return problems


def _node_problem(value: Any, depth: int) -> str | None:
    """_node_problem checks one value of the tree (its children are checked on their own)."""
    if depth > MAX_DEPTH:
        return f"nested deeper than {MAX_DEPTH} levels"
    if isinstance(value, dict) and len(value) > MAX_KEYS:
        return f"more than {MAX_KEYS} keys"
    if isinstance(value, list | tuple) and len(value) > MAX_ITEMS:
        return f"more than {MAX_ITEMS} items"
    if isinstance(value, str):
        return text_problem(value)
    return None


def _walk(data: Any) -> Iterator[tuple[str, int, Any]]:
    """_walk yields (field path, depth, value) for every value, keys included, depth first."""
    stack: list[tuple[str, int, Any]] = [("", 0, data)]
    while stack:
        path, depth, value = stack.pop()
        yield path, depth, value
        if depth > MAX_DEPTH:
            continue  # reported above; its children would only repeat it
        if isinstance(value, dict):
            for key, child in reversed(list(value.items())[: MAX_KEYS + 1]):
                name = printable(key) if isinstance(key, str) else repr(key)
                child_path = f"{path}.{name}" if path else name
                if isinstance(key, str):
                    yield child_path, depth + 1, key  # a key is text too
                stack.append((child_path, depth + 1, child))
        elif isinstance(value, list | tuple):
            for index, child in reversed(list(enumerate(value[: MAX_ITEMS + 1]))):
                stack.append((f"{path}[{index}]", depth + 1, child))


def printable(text: str) -> str:
    """printable escapes what a terminal or UTF-8 stream cannot show (lone surrogates, controls)."""
    escaped = text.encode("utf-8", "backslashreplace").decode("utf-8")
    return "".join(c if c.isprintable() else repr(c)[1:-1] for c in escaped)


def clip(message: str, limit: int = MAX_MESSAGE_CHARS) -> str:
    """clip shortens one message to ``limit`` characters on one line (values are echoed in errors)."""
    line = printable(_BREAKS.sub(" ", message))
    return line if len(line) <= limit else line[: limit - 1] + "…"
