"""A partition's output manifest, built from its staging folder without the store (``metasched commit``).

``build_manifest`` runs where the files are (the job's node, client side); ``check_manifest``
runs in the service on what arrives over the API, since a manifest is then just JSON.
"""

from __future__ import annotations

import errno
import hashlib
import os
import re
import stat
from pathlib import Path
from typing import Any

from meta.model.errors import InvalidRequest
from meta.model.limits import MAX_PATH_BYTES

_DIR_FLAGS = os.O_RDONLY | os.O_DIRECTORY | os.O_NOFOLLOW | os.O_CLOEXEC
# O_NONBLOCK: a FIFO swapped in after the scan must not hang the commit
_FILE_FLAGS = os.O_RDONLY | os.O_NOFOLLOW | os.O_NONBLOCK | os.O_CLOEXEC
_SHOWN = 5  # refused entries named in the error


def build_manifest(staging_dir: str | Path) -> dict[str, Any]:
    """build_manifest lists every regular file under the staging dir with its size and sha256.

    A symlink (to a file or a folder) or any other non-regular entry is refused by name: a
    manifest describes only what the partition wrote inside its own folder, never what a link
    points to. Entries are opened relative to their folder's descriptor with O_NOFOLLOW, so a
    link swapped in after the scan is refused too.
    """
    root = Path(staging_dir)
    try:
        root_fd = os.open(root, _DIR_FLAGS)
    except FileNotFoundError:
        raise InvalidRequest(f"staging directory {root} does not exist") from None
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENOTDIR):
            raise InvalidRequest(f"staging directory {root} is a symlink or not a directory: refused") from None
        raise
    files: list[dict[str, Any]] = []
    refused: list[str] = []
    try:
        _scan(root_fd, "", files, refused)
    finally:
        os.close(root_fd)
    if refused:
        raise InvalidRequest(_refusal(root, refused))
    files.sort(key=lambda f: f["path"].split("/"))  # the order Path sorting gave before
    return {"root": str(root), "files": files, "bytes": sum(f["size"] for f in files)}


def _refusal(root: Path, refused: list[str]) -> str:
    """_refusal names the refused entries (the first few) in one line."""
    names = ", ".join(repr(name) for name in sorted(refused)[:_SHOWN])
    more = f" and {len(refused) - _SHOWN} more" if len(refused) > _SHOWN else ""
    return f"output {root} holds symlinks or special files, nothing committed: {names}{more}"


def _scan(dir_fd: int, prefix: str, files: list[dict[str, Any]], refused: list[str]) -> None:
    """_scan records the regular files below ``dir_fd`` and collects every other entry in ``refused``."""
    with os.scandir(dir_fd) as entries:  # scandir works on a duplicate: dir_fd stays open
        listing = [(entry.name, entry.is_dir(follow_symlinks=False)) for entry in entries]
    for name, is_dir in listing:
        if is_dir:
            _scan_subdir(dir_fd, name, f"{prefix}{name}/", files, refused)
        else:
            entry = _file_entry(dir_fd, name, f"{prefix}{name}")
            if entry is None:
                refused.append(f"{prefix}{name}")
            else:
                files.append(entry)


def _scan_subdir(dir_fd: int, name: str, prefix: str, files: list[dict[str, Any]], refused: list[str]) -> None:
    """_scan_subdir descends into one sub-folder, never through a symlink."""
    try:
        fd = os.open(name, _DIR_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno not in (errno.ELOOP, errno.ENOTDIR):
            raise
        refused.append(prefix.rstrip("/"))  # replaced by a link since the scan
        return
    try:
        _scan(fd, prefix, files, refused)
    finally:
        os.close(fd)


def _file_entry(dir_fd: int, name: str, path: str) -> dict[str, Any] | None:
    """_file_entry is a regular file's path, size and sha256; None for a symlink or a special file."""
    if not stat.S_ISREG(os.stat(name, dir_fd=dir_fd, follow_symlinks=False).st_mode):
        return None  # never open a device or a pipe: opening one can block or have effects
    try:
        fd = os.open(name, _FILE_FLAGS, dir_fd=dir_fd)
    except OSError as exc:
        if exc.errno in (errno.ELOOP, errno.ENXIO, errno.EISDIR):  # a link; a socket; a swapped-in dir
            return None
        raise
    with os.fdopen(fd, "rb") as handle:
        info = os.fstat(fd)
        if not stat.S_ISREG(info.st_mode):
            return None
        digest = hashlib.sha256()
        for block in iter(lambda: handle.read(1 << 20), b""):
            digest.update(block)
    return {"path": path, "size": info.st_size, "sha256": digest.hexdigest()}


MAX_MANIFEST_FILES = 100_000  # one partition's output files; more belong in an archive
_SHA256 = re.compile(r"[0-9a-f]{64}")
_MANIFEST_KEYS = {"root", "files", "bytes"}
_FILE_KEYS = {"path", "size", "sha256"}


def check_manifest(manifest: Any) -> dict[str, Any]:
    """check_manifest accepts a manifest that arrived as JSON only in the shape build_manifest makes.

    Paths are relative, normalised and unique, sizes add up to ``bytes``: a caller cannot record
    a file outside its staging folder or a total that does not match its files.
    """
    if not isinstance(manifest, dict) or set(manifest) != _MANIFEST_KEYS:
        raise InvalidRequest(f"a manifest is a mapping of exactly {sorted(_MANIFEST_KEYS)}")
    root, files, total = manifest["root"], manifest["files"], manifest["bytes"]
    if not isinstance(root, str) or not root or len(root.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        raise InvalidRequest("manifest root: a path of at most 4096 bytes")
    if not isinstance(files, list) or len(files) > MAX_MANIFEST_FILES:
        raise InvalidRequest(f"manifest files: a list of at most {MAX_MANIFEST_FILES} entries")
    seen: set[str] = set()
    for entry in files:
        path = _checked_entry(entry)
        if path in seen:
            raise InvalidRequest(f"manifest files: {path!r} is listed twice")
        seen.add(path)
    if not _is_count(total) or total != sum(entry["size"] for entry in files):
        raise InvalidRequest("manifest bytes: must be the sum of the files' sizes")
    return manifest


def _checked_entry(entry: Any) -> str:
    """_checked_entry validates one file entry and returns its path."""
    if not isinstance(entry, dict) or set(entry) != _FILE_KEYS:
        raise InvalidRequest(f"manifest files: each entry is a mapping of exactly {sorted(_FILE_KEYS)}")
    path, size, digest = entry["path"], entry["size"], entry["sha256"]
    if not isinstance(path, str) or not _is_relative(path):
        raise InvalidRequest(f"manifest files: {str(path)[:200]!r} is not a relative path inside the output")
    if not _is_count(size):
        raise InvalidRequest(f"manifest files: {path!r} has no valid size")
    if not isinstance(digest, str) or not _SHA256.fullmatch(digest):
        raise InvalidRequest(f"manifest files: {path!r} has no valid sha256")
    return path


def _is_relative(path: str) -> bool:
    """_is_relative: non-empty, at most PATH_MAX, no NUL, and no empty, ``.`` or ``..`` part."""
    if not path or "\x00" in path or len(path.encode("utf-8", "surrogatepass")) > MAX_PATH_BYTES:
        return False
    return all(part not in ("", ".", "..") for part in path.split("/"))


def _is_count(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63
