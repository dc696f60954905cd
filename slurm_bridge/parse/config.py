"""Parse ``scontrol show config``: ``Key = value`` lines, of which metasched needs a few."""

from __future__ import annotations

import re
from dataclasses import dataclass

from slurm_bridge.errors import SlurmParseError

_LINE = re.compile(r"([A-Za-z][A-Za-z0-9_]*)\s+=\s?(.*)")
_USER = re.compile(r"(?P<name>[^()\s]+)\((?P<uid>\d+)\)")  # SlurmUser = slurm(64030)


@dataclass(frozen=True)
class SlurmConfig:
    """SlurmConfig is what metasched reads from slurmctld's configuration: the cluster and its SlurmUser."""

    cluster_name: str
    slurm_user: str
    slurm_user_uid: int | None


def config_values(text: str) -> dict[str, str]:
    """config_values is every ``Key = value`` line of ``scontrol show config``, the first of a repeated key kept."""
    values: dict[str, str] = {}
    for line in text.splitlines():
        match = _LINE.fullmatch(line.rstrip())
        if match:
            values.setdefault(match.group(1), match.group(2).strip())
    return values


def parse_show_config(text: str) -> SlurmConfig:
    """parse_show_config reads ClusterName and SlurmUser (``name(uid)``) from ``scontrol show config``."""
    values = config_values(text)
    if "ClusterName" not in values or "SlurmUser" not in values:
        raise SlurmParseError("scontrol show config: no ClusterName or SlurmUser line")
    user = _USER.fullmatch(values["SlurmUser"])
    return SlurmConfig(
        cluster_name=values["ClusterName"],
        slurm_user=user.group("name") if user else values["SlurmUser"],
        slurm_user_uid=int(user.group("uid")) if user else None,
    )
