"""What the daemon does in a job's output folder, run as the job's owner in a child process.

Standard library only: the daemon runs this file's text with a Python every user can execute
(``python3 -I -c``), after dropping to the owner's uid and groups, so it never depends on the
owner being able to read metasched's install. One JSON request arrives on stdin, one JSON
answer leaves on stdout: ``{"ok": true, ...}`` or ``{"ok": false, "reason": "..."}``.

Every path below the output root is walked with ``openat``-style calls and ``O_NOFOLLOW``: a
symlink anywhere under ``<output>`` (the job folder, ``_attempts``, an attempt, a file) is
refused, never followed. Reads stop at caps on files and bytes, checked with ``fstat`` before a
byte is read, so a huge (or sparse) file is refused without being read.
"""

from __future__ import annotations

import errno
import hashlib
import json
import os
import secrets
import shutil
import stat
import sys
from typing import Any

STAGING = "_attempts"
JOB_MANIFEST = "_manifest.json"
_DIR = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_FILE = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC  # a FIFO must not hang the walk
_NEW = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC
_SHOWN = 5  # refused entries named in a reason


class Refused(Exception):
    """Refused: the folder cannot be committed or written as asked; its message is the reason."""


def open_below(root: str, parts: list[str], *, create: bool = False) -> int:
    """open_below opens ``root/parts...`` as a folder, each part relative to the last, never through a link.

    The root itself is the path the user named (followed as given); with ``create`` a missing
    part (and the root) is made (0755 before the umask). Raises FileNotFoundError for a missing part.
    """
    if create:
        os.makedirs(root, exist_ok=True)
    fd = os.open(root, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        for part in parts:
            if create:
                try:
                    os.mkdir(part, 0o755, dir_fd=fd)
                except FileExistsError:
                    pass
            try:
                child = os.open(part, _DIR, dir_fd=fd)
            except OSError as exc:
                if exc.errno in (errno.ELOOP, errno.ENOTDIR):
                    raise Refused(f"{part!r} under {root} is a symlink or not a folder: refused") from None
                raise
            os.close(fd)
            fd = child
    except BaseException:
        os.close(fd)
        raise
    return fd


class _Walk:
    """_Walk lists a folder's regular files with size and sha256, within caps on files and bytes."""

    def __init__(self, max_files: int, max_bytes: int):
        self.max_files, self.max_bytes = max_files, max_bytes
        self.entries = 0  # every entry seen, folders too: the walk itself is bounded
        self.total = 0
        self.files: list[dict[str, Any]] = []
        self.refused: list[str] = []

    def scan(self, dir_fd: int, prefix: str) -> None:
        """scan records the entries below ``dir_fd`` (recursively), stopping at a cap."""
        with os.scandir(dir_fd) as entries:
            listing = []
            for entry in entries:
                self.entries += 1
                if self.entries > self.max_files:
                    raise Refused(f"more than {self.max_files} files or folders, over the cap")
                listing.append((entry.name, entry.is_dir(follow_symlinks=False)))
        for name, is_dir in listing:
            if is_dir:
                self._subdir(dir_fd, name, f"{prefix}{name}/")
            else:
                self._file(dir_fd, name, f"{prefix}{name}")

    def _subdir(self, dir_fd: int, name: str, prefix: str) -> None:
        """_subdir descends into one folder, never through a symlink."""
        try:
            fd = os.open(name, _DIR, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
                raise
            self.refused.append(prefix.rstrip("/"))
            return
        try:
            self.scan(fd, prefix)
        finally:
            os.close(fd)

    def _file(self, dir_fd: int, name: str, path: str) -> None:
        """_file hashes one regular file once its size fits the cap; anything else is refused by name."""
        if not stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
            self.refused.append(path)  # never open a device or a pipe
            return
        try:
            fd = os.open(name, _FILE, dir_fd=dir_fd)
        except OSError as exc:
            if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):
                self.refused.append(path)
                return
            raise
        with os.fdopen(fd, "rb") as handle:
            info = os.fstat(fd)
            if not stat.S_ISREG(info.st_mode):
                self.refused.append(path)
                return
            self.total += info.st_size
            if self.total > self.max_bytes:  # apparent size: a sparse file costs what reading it costs
                raise Refused(f"more than {self.max_bytes} bytes ({path!r} is {info.st_size}), over the cap")
            digest = hashlib.sha256()
            for block in iter(lambda: handle.read(1 << 20), b""):
                digest.update(block)
        self.files.append({"path": path, "size": info.st_size, "sha256": digest.hexdigest()})


def scan_staging(request: dict[str, Any]) -> dict[str, Any]:
    """scan_staging is an attempt's manifest from ``<output>/<job>/_attempts/<attempt>/`` (or the legacy place).

    A missing staging folder is an empty manifest, as before; a symlink on the way, a special
    file, or too many files or bytes is a refusal with its reason.
    """
    root, job, attempt = request["output"], request["job"], request["attempt"]
    places = [([job, STAGING, attempt], f"{root}/{job}/{STAGING}/{attempt}"),
              ([STAGING, attempt], f"{root}/{STAGING}/{attempt}")]  # fmt: skip
    for parts, shown in places:
        try:
            fd = open_below(root, parts)
        except FileNotFoundError:
            continue
        walk = _Walk(int(request["max_files"]), int(request["max_bytes"]))
        try:
            walk.scan(fd, "")
        finally:
            os.close(fd)
        if walk.refused:
            names = ", ".join(repr(n) for n in sorted(walk.refused)[:_SHOWN])
            raise Refused(f"output {shown} holds symlinks or special files: {names}")
        walk.files.sort(key=lambda f: f["path"].split("/"))
        return {"root": shown, "files": walk.files, "bytes": walk.total}
    return {"root": places[0][1], "files": [], "bytes": 0}


def write_job_manifest(request: dict[str, Any]) -> dict[str, Any]:
    """write_job_manifest writes ``<output>/<job>/_manifest.json`` (temp file, fsync, rename) and removes stale staging."""
    fd = open_below(request["output"], [request["job"]], create=True)
    try:
        if os.fstat(fd).st_uid != os.geteuid():
            raise Refused(f"{request['job']!r} under {request['output']} is not owned by uid {os.geteuid()}")
        _replace(fd, JOB_MANIFEST, json.dumps(request["manifest"], indent=2, sort_keys=True).encode())
        removed = _remove_staging(fd, request.get("remove", []))
    finally:
        os.close(fd)
    return {"removed": removed}


def _replace(dir_fd: int, name: str, data: bytes) -> None:
    """_replace writes ``data`` to a new temp file in the folder and renames it over ``name``."""
    temp = f".manifest-{secrets.token_hex(8)}"
    fd = os.open(temp, _NEW, 0o644, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(data)
            handle.flush()
            os.fsync(handle.fileno())
        # a link named ``name`` is replaced, not followed
        os.replace(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        try:
            os.unlink(temp, dir_fd=dir_fd)
        except FileNotFoundError:
            pass
        raise


def _remove_staging(job_fd: int, attempts: list[str]) -> list[str]:
    """_remove_staging deletes the named attempts' staging folders (fd-relative: links are not followed)."""
    try:
        staging = os.open(STAGING, _DIR, dir_fd=job_fd)
    except OSError:
        return []  # none, or a link: not ours to delete in
    removed = []
    try:
        present = set(os.listdir(staging))
        for name in attempts:
            if name in present and "/" not in name and name not in (".", ".."):
                shutil.rmtree(name, dir_fd=staging, ignore_errors=True)
                removed.append(name)
    finally:
        os.close(staging)
    return removed


_ACTIONS = {"scan": scan_staging, "finalize": write_job_manifest}


def main() -> None:
    """main answers one request from stdin on stdout; a refusal or an OS error is an answer, not a crash."""
    try:
        os.nice(10)  # the daemon's own work comes first
    except OSError:
        pass
    request = json.loads(sys.stdin.read())
    try:
        answer = {"ok": True, **_ACTIONS[request["action"]](request)}
    except Refused as exc:
        answer = {"ok": False, "reason": str(exc)}
    except OSError as exc:
        answer = {"ok": False, "reason": f"{exc.strerror or exc} ({exc.filename or ''})"}
    sys.stdout.write(json.dumps(answer))


if __name__ == "__main__":
    main()
