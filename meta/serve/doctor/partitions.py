"""Managed partitions: job_submit.lua in place, and the partitions it holds exactly those the daemon adopts.

A plain ``sbatch -p <managed>`` job is held by ``deploy/slurm/job_submit.lua`` until metasched's
daemon adopts and releases it. A partition the script holds but the daemon does not manage
(``serve`` without ``--managed-partitions``) keeps such jobs held forever; a partition the daemon
manages but the script does not hold lets them start without metasched. The script's partitions
are read from its ``local MANAGED = { name = true, ... }`` table (the shipped script's form).
"""

from __future__ import annotations

import re
from collections.abc import Collection, Sequence
from dataclasses import dataclass
from pathlib import Path

from meta.serve.doctor.check import Check, fail, ok, warn
from meta.serve.doctor.slurm_config import SlurmFacts, flags, running_value

LUA_NAME = "job_submit.lua"
_MANAGED_TABLE = re.compile(r"^\s*local\s+MANAGED\s*=\s*\{(?P<body>[^}]*)\}", re.MULTILINE)
_TABLE_ENTRY = re.compile(r"""\[?\s*["']?(?P<name>[A-Za-z0-9_.-]+)["']?\s*\]?\s*=\s*true""")


@dataclass(frozen=True)
class LuaScript:
    """LuaScript is job_submit.lua as found next to slurm.conf: its path, whether it is there, the partitions it holds."""

    path: Path
    present: bool
    held: frozenset[str] | None  # None: no MANAGED table could be read


def lua_managed(text: str) -> frozenset[str] | None:
    """lua_managed reads the partitions of job_submit.lua's ``local MANAGED = {...}`` table (None when absent)."""
    match = _MANAGED_TABLE.search(text)
    if match is None:
        return None
    body = re.sub(r"--[^\n]*", "", match.group("body"))  # Lua comments
    return frozenset(entry.group("name") for entry in _TABLE_ENTRY.finditer(body))


def read_lua(folder: Path) -> LuaScript:
    """read_lua reads job_submit.lua from slurm.conf's folder (absent or unreadable: not present)."""
    path = folder / LUA_NAME
    try:
        text = path.read_text(encoding="utf-8", errors="replace")
    except OSError:
        return LuaScript(path, False, None)
    return LuaScript(path, True, lua_managed(text))


def lua_enabled(facts: SlurmFacts) -> bool:
    """lua_enabled tells whether slurm.conf (else the running controller) loads the lua job_submit plugin."""
    return "lua" in flags(facts.setting("JobSubmitPlugins"))


def job_submit_check(facts: SlurmFacts, lua: LuaScript, managed: Sequence[str]) -> Check:
    """job_submit_check: with managed partitions, JobSubmitPlugins=lua is on and job_submit.lua is in place."""
    names = ", ".join(managed)
    if not lua_enabled(facts):
        if managed:
            return fail("job-submit", f"the daemon manages {names} but {facts.conf_path} has no JobSubmitPlugins=lua: "
                                      "plain sbatch jobs there are not held for metasched; set it and install "
                                      f"deploy/slurm/job_submit.lua as {lua.path}")  # fmt: skip
        return ok("job-submit", "no job_submit plugin and no managed partition: plain sbatch jobs go to Slurm alone")
    if not lua.present:
        return fail("job-submit", f"JobSubmitPlugins=lua but there is no {lua.path}: slurmctld cannot load it; "
                                  "install deploy/slurm/job_submit.lua there")  # fmt: skip
    running = running_value(facts.running, "JobSubmitPlugins")
    if facts.running is not None and "lua" not in flags(running):
        return fail("job-submit", f"{facts.conf_path} sets JobSubmitPlugins=lua but slurmctld runs with "
                                  f"{running or '(none)'}: run `scontrol reconfigure`")  # fmt: skip
    return ok("job-submit", f"{lua.path} in place (JobSubmitPlugins=lua)")


def managed_partitions_check(managed: Sequence[str], lua: LuaScript, enabled: bool, partitions: Collection[str]) -> Check:
    """managed_partitions_check: every partition the script holds is managed by the daemon, and the other way round."""
    unknown = [name for name in managed if partitions and name not in partitions]
    if unknown:
        return fail("managed-partitions", f"managed_partitions names {', '.join(unknown)}, which Slurm has no "
                                          "partition of: fix serve --managed-partitions")  # fmt: skip
    in_force = enabled and lua.present
    if in_force and lua.held is None:
        return warn("managed-partitions", f"cannot read `local MANAGED = {{...}}` in {lua.path}: check by hand that "
                                          f"it holds exactly: {', '.join(managed) or 'no partition'}")  # fmt: skip
    held = (lua.held or frozenset()) if in_force else frozenset()
    stuck = sorted(held - set(managed))
    if stuck:
        return fail("managed-partitions", f"{lua.path} holds plain sbatch jobs in {', '.join(stuck)}, which the daemon "
                                          "does not manage: they wait held forever; add them to managed_partitions "
                                          "(serve --managed-partitions)")  # fmt: skip
    loose = [name for name in managed if name not in held]
    if loose:
        return fail("managed-partitions", f"the daemon manages {', '.join(loose)} but job_submit.lua does not hold "
                                          "jobs there: plain sbatch jobs start without metasched; add them to "
                                          f"MANAGED in {lua.path}")  # fmt: skip
    if not managed:
        return ok("managed-partitions", "none: plain sbatch jobs are not adopted")
    return ok("managed-partitions", f"{', '.join(managed)}: held by job_submit.lua, adopted by the daemon")
