"""Private folders and files: what only their owner may read, written without following a symlink.

Tenant secrets and the daemon's store URL live here. Below the folder an operator chose, every
path is opened relative to its parent's descriptor with ``O_NOFOLLOW``: a symlink planted by
someone else is refused, never followed, and what is checked (``fstat`` of the open descriptor)
is what is used, so the check cannot be raced apart from the use.
"""

from __future__ import annotations

import contextlib
import errno
import os
import secrets
import stat
from collections.abc import Iterator
from pathlib import Path

from meta.model.errors import MetaschedError

PRIVATE_DIR_MODE = 0o700
PRIVATE_FILE_MODE = 0o600
_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
_NEW_FILE_FLAGS = os.O_WRONLY | os.O_CREAT | os.O_EXCL | os.O_NOFOLLOW | os.O_CLOEXEC


class UnsafePath(MetaschedError):
    """UnsafePath: a folder or file is a symlink, not ours or writable by others, so it is left alone."""


def open_private_dir(parent_fd: int, name: str, *, create: bool, label: str) -> int | None:
    """open_private_dir opens folder ``name`` of ``parent_fd`` (made 0700 if ``create``); None if missing."""
    if create:
        with contextlib.suppress(FileExistsError):
            os.mkdir(name, PRIVATE_DIR_MODE, dir_fd=parent_fd)
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=parent_fd)
    except FileNotFoundError:
        if create:
            raise
        return None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise UnsafePath(f"{label} is a symlink or not a folder: refused") from None
        raise
    try:
        _require_private(fd, label)
    except BaseException:
        os.close(fd)
        raise
    return fd


def _require_private(fd: int, label: str) -> None:
    """_require_private refuses an open folder that is not ours or that others may write; it ends 0700."""
    info = os.fstat(fd)
    if not stat.S_ISDIR(info.st_mode):
        raise UnsafePath(f"{label} is not a folder: refused")
    if info.st_uid != os.geteuid():
        raise UnsafePath(f"{label} is owned by uid {info.st_uid}, not by us (uid {os.geteuid()}): refused")
    if info.st_mode & 0o022:
        # someone else may already have put files in it: nothing inside can be trusted
        raise UnsafePath(f"{label} is writable by group or others (mode {stat.S_IMODE(info.st_mode):o}): refused")
    if stat.S_IMODE(info.st_mode) != PRIVATE_DIR_MODE:
        os.fchmod(fd, PRIVATE_DIR_MODE)  # ours and only readable by others (an older version made it so)


@contextlib.contextmanager
def opened_dir(path: str | Path, *, create: bool = True) -> Iterator[int]:
    """opened_dir opens a folder the operator chose (symlinks in its path allowed), creating it if missing."""
    if create:
        Path(path).mkdir(parents=True, exist_ok=True)
    fd = os.open(path, os.O_RDONLY | os.O_DIRECTORY | os.O_CLOEXEC)
    try:
        yield fd
    finally:
        os.close(fd)


@contextlib.contextmanager
def private_dir(path: str | Path) -> Iterator[int]:
    """private_dir creates (0700) and opens a folder that must be ours, not a symlink, written by no one else."""
    folder = Path(path).absolute()
    with opened_dir(folder.parent) as parent:
        fd = open_private_dir(parent, folder.name, create=True, label=str(folder))
        assert fd is not None  # create=True never yields None
        try:
            yield fd
        finally:
            os.close(fd)


def write_private(dir_fd: int, name: str, data: str | bytes) -> None:
    """write_private replaces file ``name`` of ``dir_fd`` atomically by a 0600 file holding ``data``."""
    payload = data.encode("utf-8") if isinstance(data, str) else data
    # a fresh random temp name with O_EXCL|O_NOFOLLOW: a planted file or link is never written through
    temp = f".{name}.{secrets.token_hex(8)}.tmp"
    fd = os.open(temp, _NEW_FILE_FLAGS, PRIVATE_FILE_MODE, dir_fd=dir_fd)
    try:
        with os.fdopen(fd, "wb") as handle:
            handle.write(payload)
            handle.flush()
            os.fsync(handle.fileno())
        # rename replaces a link at ``name`` itself, never the file it points to
        os.rename(temp, name, src_dir_fd=dir_fd, dst_dir_fd=dir_fd)
    except BaseException:
        with contextlib.suppress(FileNotFoundError):
            os.unlink(temp, dir_fd=dir_fd)
        raise


def read_regular(dir_fd: int, name: str, limit: int) -> bytes | None:
    """read_regular reads regular file ``name`` of ``dir_fd`` (never through a link), up to ``limit`` bytes; None if absent."""
    try:
        fd = os.open(name, os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC, dir_fd=dir_fd)
    except (FileNotFoundError, OSError) as exc:
        if isinstance(exc, FileNotFoundError) or exc.errno == errno.ELOOP:
            return None
        raise
    with os.fdopen(fd, "rb") as handle:
        if not stat.S_ISREG(os.fstat(handle.fileno()).st_mode):
            return None  # a FIFO or a device is no secret (O_NONBLOCK: opening one never hangs)
        return handle.read(limit)


def regular_files(dir_fd: int) -> list[str]:
    """regular_files lists the names of the regular files of a folder (never links, folders or devices)."""
    with os.scandir(dir_fd) as entries:  # scandir works on a duplicate: dir_fd stays open
        return sorted(entry.name for entry in entries if entry.is_file(follow_symlinks=False))


def remove_regular(dir_fd: int, name: str) -> bool:
    """remove_regular deletes regular file ``name`` of ``dir_fd``; False when there is no such file."""
    try:
        info = os.stat(name, dir_fd=dir_fd, follow_symlinks=False)
    except FileNotFoundError:
        return False
    if not stat.S_ISREG(info.st_mode):
        return False
    os.unlink(name, dir_fd=dir_fd)  # unlink removes a name, it never follows one
    return True
