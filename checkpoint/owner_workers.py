"""Work in users' output folders, done off the period, as the folder's owner (steps 4 and 14 hand it over).

The period only hands work over (``submit``) and picks results up (``result``); it never
waits. Each piece of work is one child process running ``checkpoint/owner_files.py`` with the
job owner's uid, gid and groups (when the daemon is root), bounded in files, bytes and seconds:
over a cap, the answer is a refusal with its reason. A few threads start the children, so at
most ``workers`` folders are read at a time whatever users put there, owners taken in turn.
"""

from __future__ import annotations

import json
import logging
import os
import pwd
import subprocess
import sys
import threading
import time
from collections import OrderedDict, deque
from collections.abc import Callable
from dataclasses import dataclass
from pathlib import Path
from typing import Any

import checkpoint.owner_files

log = logging.getLogger("metasched.outputs")
_PYTHONS = ("/usr/bin/python3", "/usr/local/bin/python3")  # usable by every user, unlike root's pyenv
_KEEP_S = 600.0  # a result waits this long to be picked up (a rolled-back period asks again)


@dataclass(frozen=True)
class OutputCaps:
    """OutputCaps bound what the daemon reads for one partition it commits on the job's behalf.

    Outputs beyond them belong to ``metasched commit``, run by the job on its own node.
    """

    max_files: int = 10_000
    max_bytes: int = 1 << 30
    max_seconds: float = 60.0
    workers: int = 2


@dataclass(frozen=True)
class Owner:
    """Owner is whom a child runs as: None fields keep the daemon's own identity."""

    uid: int | None = None
    gid: int | None = None


@dataclass(frozen=True)
class Answer:
    """Answer is one finished piece of work: ``ok`` and its data, or the reason it was refused."""

    ok: bool
    data: dict[str, Any]
    reason: str = ""


Runner = Callable[[dict[str, Any], Owner, float], Answer]


class OutputWorkers:
    """OutputWorkers runs owner-side output work in the background, one result per key.

    Work waits in one queue per owner and the threads take the owners in turn: one user's
    thousand partitions delay another user's commit by at most one piece of work per thread.
    """

    def __init__(self, caps: OutputCaps | None = None, runner: Runner | None = None):
        self.caps = caps or OutputCaps()
        self._run = runner or ChildRunner()
        self._cond = threading.Condition()
        self._queues: dict[int | None, deque[tuple[str, dict[str, Any], Owner]]] = {}  # in turn order
        self._pending: set[str] = set()  # queued or running
        # answers in the order they came (each stamped under the lock): the oldest expire first
        self._done: OrderedDict[str, tuple[float, Answer]] = OrderedDict()
        self._threads: list[threading.Thread] = []
        self._closed = False

    def submit(self, key: str, request: dict[str, Any], owner: Owner) -> None:
        """submit queues one request under ``key`` unless it is queued, running or answered already."""
        request = {**request, "max_files": self.caps.max_files, "max_bytes": self.caps.max_bytes}
        with self._cond:
            self._expire()
            if self._closed or key in self._pending or key in self._done:
                return
            self._queues.setdefault(owner.uid, deque()).append((key, request, owner))
            self._pending.add(key)
            if len(self._threads) < self.caps.workers:  # started on demand: most daemons never need them
                thread = threading.Thread(
                    target=self._serve, name=f"outputs-{len(self._threads)}", daemon=True
                )
                self._threads.append(thread)
                thread.start()
            self._cond.notify()

    def result(self, key: str) -> Answer | None:
        """result is the answer for ``key`` once its work finished, None while it is queued or running."""
        with self._cond:
            kept = self._done.get(key)
        return kept[1] if kept else None

    def wait_idle(self, timeout_s: float) -> bool:
        """wait_idle waits until nothing is queued or running (tests and ``--once``; never the period)."""
        with self._cond:
            return self._cond.wait_for(lambda: not self._pending, timeout_s)

    def close(self) -> None:
        """close drops queued work and kills the children under way (their partitions are asked for again)."""
        with self._cond:
            self._closed = True
            for queue in self._queues.values():
                self._pending.difference_update(key for key, _, _ in queue)
            self._queues.clear()
            self._cond.notify_all()
        stop = getattr(self._run, "stop", None)
        if stop is not None:
            stop()

    def _next(self) -> tuple[str, dict[str, Any], Owner] | None:
        """_next is the next owner's oldest work (that owner goes to the back of the turn), None once closed."""
        with self._cond:
            self._cond.wait_for(lambda: self._closed or bool(self._queues))
            if self._closed:
                return None
            uid = next(iter(self._queues))
            queue = self._queues.pop(uid)
            work = queue.popleft()
            if queue:
                self._queues[uid] = queue
            return work

    def _serve(self) -> None:
        """_serve is one worker thread: take work in turn, run it, keep its answer."""
        while (work := self._next()) is not None:
            key, request, owner = work
            answer = self._guarded(request, owner)
            with self._cond:
                self._pending.discard(key)
                self._done[key] = (time.monotonic(), answer)
                self._cond.notify_all()

    def _guarded(self, request: dict[str, Any], owner: Owner) -> Answer:
        """_guarded runs one request; any failure of the runner itself is a refusal, never a lost future."""
        try:
            return self._run(request, owner, self.caps.max_seconds)
        except Exception as exc:  # noqa: BLE001 - one folder's failure must not take a worker down
            log.warning("output work %s failed: %s", request.get("action"), exc)
            return Answer(False, {}, f"the output worker failed: {exc}")

    def _expire(self) -> None:
        """_expire drops answers nobody picked up in time (the lock is held).

        Only the oldest are looked at: scanning every answer kept (up to ten minutes of ended
        partitions) on each submit made 2,000 ends cost seconds after a long run (issue 24).
        """
        stale = time.monotonic() - _KEEP_S
        done = self._done
        while done and next(iter(done.values()))[0] < stale:
            done.popitem(last=False)


class ChildRunner:
    """ChildRunner runs ``owner_files`` in a child process, as the owner when the daemon is root."""

    def __init__(self) -> None:
        self._source = Path(checkpoint.owner_files.__file__).read_text(encoding="utf-8")
        self._lock = threading.Lock()
        self._children: set[subprocess.Popen[bytes]] = set()
        self._stopped = False

    def __call__(self, request: dict[str, Any], owner: Owner, timeout_s: float) -> Answer:
        """__call__ runs one request with a time cap; the child is killed when the cap passes."""
        drop = os.geteuid() == 0 and owner.uid is not None and owner.uid != 0
        argv = [python_for(drop), "-I", "-c", self._source]
        with self._lock:
            if self._stopped:
                return Answer(False, {}, "the daemon is stopping")
            child = subprocess.Popen(
                argv, stdin=subprocess.PIPE, stdout=subprocess.PIPE, stderr=subprocess.PIPE, cwd="/",
                env={"PATH": "/usr/bin:/bin", "LC_ALL": "C.UTF-8"}, umask=0o022, **_identity(owner, drop),
            )  # fmt: skip
            self._children.add(child)
        try:
            out, err = child.communicate(json.dumps(request).encode(), timeout=timeout_s)
        except subprocess.TimeoutExpired:
            child.kill()
            child.communicate()
            return Answer(False, {}, f"reading it took over {timeout_s:g} s, the cap")
        finally:
            with self._lock:
                self._children.discard(child)
        return _answer(out, err, child.returncode)

    def stop(self) -> None:
        """stop kills the children under way and starts no more (the daemon is shutting down)."""
        with self._lock:
            self._stopped = True
            for child in self._children:
                child.kill()


def _answer(out: bytes, err: bytes, code: int | None) -> Answer:
    """_answer reads the child's one JSON answer; anything else is a failure named by its last error line."""
    try:
        answer = json.loads(out)
    except ValueError:
        last = err.decode(errors="replace").strip().splitlines()[-1:] or [f"exit {code}"]
        return Answer(False, {}, f"the output worker failed: {last[0][:200]}")
    ok = bool(answer.pop("ok", False))
    return Answer(ok, answer, "" if ok else str(answer.get("reason", "refused")))


def _identity(owner: Owner, drop: bool) -> dict[str, Any]:
    """_identity are subprocess's arguments that make the child the owner (uid, gid, groups)."""
    if not drop:
        return {}
    assert owner.uid is not None
    gid = owner.gid if owner.gid is not None else owner.uid
    try:
        groups = os.getgrouplist(pwd.getpwuid(owner.uid).pw_name, gid)
    except KeyError:  # a uid with no passwd entry: its primary group only
        groups = [gid]
    return {"user": owner.uid, "group": gid, "extra_groups": groups}


def python_for(drop: bool) -> str:
    """python_for is an interpreter the child's user can run: this one, or the system's when it is private."""
    if not drop or _everyone_runs(sys.executable):
        return sys.executable
    for path in _PYTHONS:
        if _everyone_runs(path):
            return path
    return sys.executable  # the child then fails and says so: the partition's reason names it


def _everyone_runs(path: str) -> bool:
    """_everyone_runs: the file and every folder above it are executable by others."""
    real = Path(os.path.realpath(path))
    try:
        return all(os.stat(p).st_mode & 0o001 for p in [real, *real.parents])
    except OSError:
        return False
