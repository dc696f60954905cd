"""The daemon's state folder: where ``metasched serve`` keeps the store URL its jobs read.

A PostgreSQL URL carries its password, so the folder is the user's own and never a guessable
shared path such as ``/tmp/...`` (anyone could create that first): ``--state-dir`` /
``METASCHED_STATE_DIR``, else ``$XDG_STATE_HOME/metasched``, else ``~/.local/state/metasched``.
It is created 0700 and refused when it is a symlink, not ours or writable by others; the URL file
is written 0600 under a fresh temp name and renamed into place, never through a link.

``--log-dir`` (where the daemon's own jobs write their output, as the daemon's user) gets the same
checks (issue 22, S10): made 0700 when missing, refused when it is a symlink, not ours or
writable by others, so no local user can create it first and read or plant root's job logs.
"""

from __future__ import annotations

import hashlib
import os
from dataclasses import dataclass
from pathlib import Path

from meta.store.private_files import open_private_dir, private_dir, write_private

STATE_ENV = "METASCHED_STATE_DIR"


@dataclass(frozen=True)
class DaemonFiles:
    """DaemonFiles are the paths the daemon hands to its jobs."""

    state_dir: Path
    db_url_file: Path
    log_dir: Path


def url_file_name(url: str) -> str:
    """url_file_name names a store's URL file: one per store, so daemons on other stores never collide."""
    # a digest, not the URL: the name may be listed where the content may not be read
    return f"db-url-{hashlib.sha256(url.encode('utf-8')).hexdigest()[:16]}"


def prepare_daemon_files(state_dir: str | Path, url: str, log_dir: str | None) -> DaemonFiles:
    """prepare_daemon_files verifies the state folder, writes the store URL in it (0600) and picks the log folder."""
    folder = Path(state_dir).absolute()
    name = url_file_name(url)
    with private_dir(folder) as fd:
        write_private(fd, name, url + "\n")
        if log_dir is None:
            logs = open_private_dir(fd, "logs", create=True, label=str(folder / "logs"))
            assert logs is not None  # create=True never yields None
            os.close(logs)
    if log_dir is None:
        return DaemonFiles(folder, folder / name, folder / "logs")
    logs_path = Path(log_dir).absolute()
    with private_dir(logs_path):
        pass  # created 0700, or verified as the state folder is (UnsafePath otherwise)
    return DaemonFiles(folder, folder / name, logs_path)
