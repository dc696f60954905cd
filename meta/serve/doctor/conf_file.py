"""slurm.conf as a file: its global ``Key=Value`` settings and partition names, ``Include`` files followed.

The file is read, not slurmctld's running configuration (``scontrol show config``): it is what
slurmctld loads at its next start or ``scontrol reconfigure``, and what ``--slurm-conf`` points the
doctor at. Keys are case-insensitive as Slurm reads them; a repeated key keeps its last value, as
Slurm does. job_submit.lua lives next to it (Slurm's ``get_extra_conf_path``).
"""

from __future__ import annotations

import glob
import os
from dataclasses import dataclass, field
from pathlib import Path

DEFAULT_SLURM_CONF = Path("/etc/slurm/slurm.conf")  # Debian's; SLURM_CONF overrides it, as for Slurm's commands
SLURM_CONF_ENV = "SLURM_CONF"
MAX_INCLUDE_DEPTH = 8  # Slurm nests includes; a loop must not hang the doctor
_OBJECT_KEYS = ("nodename", "partitionname", "nodeset", "frontendname", "downnodes", "switchname")


@dataclass(frozen=True)
class SlurmConf:
    """SlurmConf is what the doctor reads from slurm.conf: global settings by lower-case key, and partitions."""

    path: Path
    values: dict[str, str] = field(default_factory=dict)
    partitions: tuple[str, ...] = ()

    def get(self, key: str) -> str | None:
        """get is a global setting's value (any case of its key), None when the file does not set it."""
        return self.values.get(key.lower())

    @property
    def folder(self) -> Path:
        """folder is where slurm.conf is: Slurm reads job_submit.lua, gres.conf, ... from there."""
        return self.path.parent


def slurm_conf_path(given: str | None) -> Path:
    """slurm_conf_path is ``--slurm-conf``, else SLURM_CONF, else /etc/slurm/slurm.conf (as Slurm's commands pick it)."""
    return Path(given or os.environ.get(SLURM_CONF_ENV) or DEFAULT_SLURM_CONF)


def parse_lines(text: str) -> list[tuple[str, str, str]]:
    """parse_lines reads one file's text as ordered items: ("set", key, value), ("partition", name, ""), ("include", target, "")."""
    items: list[tuple[str, str, str]] = []
    for raw in text.splitlines():
        content = raw.split("#", 1)[0].strip()
        if not content:
            continue
        head, _, rest = content.partition(" ")
        if head.lower() == "include" and "=" not in head:
            items.append(("include", rest.strip(), ""))
            continue
        key, sep, value = content.partition("=")
        if not sep:
            continue
        key = key.strip().lower()
        if key == "partitionname":
            name = value.split()[0] if value.split() else ""
            if name and name.upper() != "DEFAULT":
                items.append(("partition", name, ""))
        elif key not in _OBJECT_KEYS:
            items.append(("set", key, value.strip().strip('"')))
    return items


def read_slurm_conf(path: Path) -> SlurmConf:
    """read_slurm_conf reads slurm.conf and the files it includes (raises OSError when the file cannot be read)."""
    values: dict[str, str] = {}
    partitions: list[str] = []
    _read_into(path, values, partitions, depth=0)
    return SlurmConf(path=path, values=values, partitions=tuple(dict.fromkeys(partitions)))


def _read_into(path: Path, values: dict[str, str], partitions: list[str], depth: int) -> None:
    """_read_into applies one file's items in order, an Include's files where the line is (later lines win)."""
    for kind, first, second in parse_lines(path.read_text(encoding="utf-8", errors="replace")):
        if kind == "set":
            values[first] = second
        elif kind == "partition":
            partitions.append(first)
        elif depth < MAX_INCLUDE_DEPTH:
            pattern = first if os.path.isabs(first) else str(path.parent / first)
            for found in sorted(glob.glob(pattern)):
                try:
                    _read_into(Path(found), values, partitions, depth + 1)
                except OSError:
                    continue  # an unreadable include: Slurm reports it itself; what we need is in the main file
