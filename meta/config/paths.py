"""Where a daemon keeps its own files by default: a folder of the user's, never a shared /tmp path."""

from __future__ import annotations

import os
from pathlib import Path


def default_state_dir() -> Path:
    """default_state_dir is ``$XDG_STATE_HOME/metasched``, else ``~/.local/state/metasched``."""
    base = os.environ.get("XDG_STATE_HOME", "")
    if not os.path.isabs(base):  # the XDG spec: a relative value is invalid and ignored
        base = str(Path.home() / ".local" / "state")
    return Path(base) / "metasched"


def default_log_dir() -> str:
    """default_log_dir is where job logs go unless the daemon is told otherwise."""
    return str(default_state_dir() / "logs")
