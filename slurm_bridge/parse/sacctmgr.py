"""Parsing ``sacctmgr -n -P show ...`` output: one record per line, fields split by ``|``."""

from __future__ import annotations

from meta.model.limits import is_slurm_name
from slurm_bridge.errors import SlurmParseError


def parse_qos_names(text: str) -> list[str]:
    """parse_qos_names reads ``sacctmgr -n -P show qos format=Name``: one QOS name per line."""
    names = [line.strip() for line in text.splitlines() if line.strip()]
    odd = [name for name in names if not is_slurm_name(name)]
    if odd:
        raise SlurmParseError(f"sacctmgr show qos: not a QOS name: {odd[0][:80]!r}")
    return names
