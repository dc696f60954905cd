"""Parse ``sdiag`` text: controller health counters (thread count, agent queue, cycle times, RPCs)."""

from __future__ import annotations

import re
from dataclasses import dataclass, field

from slurm_bridge.errors import SlurmParseError

_RPC = re.compile(r"^\s*(?P<name>\S+)\s*\(\s*\d+\s*\)\s+count:(?P<count>\d+)\s+ave_time:(?P<ave>\d+)")
_STAT = re.compile(r"^(?P<indent>\s*)(?P<key>[A-Za-z][^:]*?):\s*(?P<value>.*)$")


@dataclass(frozen=True, slots=True)
class Sdiag:
    """Sdiag holds the controller statistics the scheduler watches, plus every raw line by key."""

    server_thread_count: int | None
    agent_queue_size: int | None
    dbd_agent_queue_size: int | None
    jobs_submitted: int | None
    jobs_pending: int | None
    jobs_running: int | None
    main_last_cycle_us: int | None
    main_mean_cycle_us: int | None
    backfill_last_cycle_us: int | None
    rpc_counts: dict[str, int] = field(default_factory=dict)
    rpc_ave_time_us: dict[str, int] = field(default_factory=dict)
    raw: dict[str, str] = field(default_factory=dict)


def parse_sdiag(text: str) -> Sdiag:
    """parse_sdiag reads sdiag's ``Key: value`` lines; section lines qualify indented keys."""
    raw: dict[str, str] = {}
    rpc_counts: dict[str, int] = {}
    rpc_ave: dict[str, int] = {}
    section = ""
    for line in text.splitlines():
        if not line.strip() or line.startswith(("*", "sdiag output at", "Data since")):
            continue
        rpc = _RPC.match(line)
        if rpc:
            rpc_counts[rpc.group("name")] = int(rpc.group("count"))
            rpc_ave[rpc.group("name")] = int(rpc.group("ave"))
            continue
        stat = _STAT.match(line)
        if stat and stat.group("value").strip():
            key = stat.group("key").strip()
            raw[f"{section}/{key}" if stat.group("indent") and section else key] = stat.group("value").strip()
        elif not line[0].isspace():
            section = line.strip().rstrip(":")
    if "Server thread count" not in raw:
        raise SlurmParseError("sdiag: no 'Server thread count' line; not sdiag output?")
    return Sdiag(
        server_thread_count=_first_int(raw, "Server thread count"),
        agent_queue_size=_first_int(raw, "Agent queue size"),
        dbd_agent_queue_size=_first_int(raw, "DBD Agent queue size"),
        jobs_submitted=_first_int(raw, "Jobs submitted"),
        jobs_pending=_first_int(raw, "Jobs pending"),
        jobs_running=_first_int(raw, "Jobs running"),
        main_last_cycle_us=_section_int(raw, "Main schedule statistics", "Last cycle"),
        main_mean_cycle_us=_section_int(raw, "Main schedule statistics", "Mean cycle"),
        backfill_last_cycle_us=_section_int(raw, "Backfilling stats", "Last cycle"),
        rpc_counts=rpc_counts,
        rpc_ave_time_us=rpc_ave,
        raw=raw,
    )


def _first_int(raw: dict[str, str], key: str) -> int | None:
    """_first_int reads the leading integer of a value."""
    match = re.match(r"-?\d+", raw.get(key, ""))
    return int(match.group()) if match else None


def _section_int(raw: dict[str, str], section_prefix: str, key: str) -> int | None:
    """_section_int reads ``key`` inside the first section whose title starts with ``section_prefix``."""
    for name, value in raw.items():
        head, _, tail = name.rpartition("/")
        if head.startswith(section_prefix) and tail == key:
            return _first_int({key: value}, key)
    return None
