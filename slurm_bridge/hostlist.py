"""Slurm hostlist expressions: ``a100n[1-2],t4n1`` <-> ``["a100n1", "a100n2", "t4n1"]``."""

from __future__ import annotations

import functools
import re
from collections.abc import Iterable

from slurm_bridge.errors import SlurmParseError

_EMPTY = {"", "(null)", "None assigned", "N/A", "none"}
_TRAILING_NUMBER = re.compile(r"^(.*?)(\d+)$")
_RANGE = re.compile(r"^(\d+)(?:-(\d+))?$")


class HostlistError(SlurmParseError):
    """HostlistError is raised for malformed hostlist expressions."""


@functools.lru_cache(maxsize=4096)
def expand_cached(expression: str) -> tuple[str, ...]:
    """expand_cached is ``expand`` as a tuple, remembered: squeue repeats a few node lists many times."""
    return tuple(expand(expression))


def expand(expression: str) -> list[str]:
    """expand turns a hostlist expression into host names, in order, duplicates kept."""
    expression = expression.strip()
    if expression in _EMPTY:
        return []
    hosts: list[str] = []
    for item in _split_top_level(expression):
        hosts.extend(_expand_item(item))
    return hosts


def _split_top_level(expression: str) -> list[str]:
    """_split_top_level splits on commas that are not inside brackets."""
    items, depth, current = [], 0, []
    for char in expression:
        if char == "[":
            depth += 1
            if depth > 1:
                raise HostlistError(f"nested brackets in hostlist {expression!r}")
        elif char == "]":
            depth -= 1
            if depth < 0:
                raise HostlistError(f"unbalanced ']' in hostlist {expression!r}")
        if char == "," and depth == 0:
            items.append("".join(current))
            current = []
        else:
            current.append(char)
    if depth != 0:
        raise HostlistError(f"unbalanced '[' in hostlist {expression!r}")
    items.append("".join(current))
    if any(not item.strip() for item in items):
        raise HostlistError(f"empty host in hostlist {expression!r}")
    return [item.strip() for item in items]


def _expand_item(item: str) -> list[str]:
    """_expand_item expands one host pattern, possibly with several bracket groups."""
    start = item.find("[")
    if start < 0:
        if "]" in item or " " in item:
            raise HostlistError(f"bad host name {item!r}")
        return [item]
    end = item.index("]", start)
    prefix, body, rest = item[:start], item[start + 1 : end], item[end + 1 :]
    suffixes = _expand_item(rest) if rest else [""]
    return [f"{prefix}{number}{suffix}" for number in _expand_ranges(body, item) for suffix in suffixes]


def _expand_ranges(body: str, item: str) -> list[str]:
    """_expand_ranges expands ``01-03,7`` into ``["01", "02", "03", "7"]`` (keeping zero padding)."""
    numbers: list[str] = []
    for part in body.split(","):
        match = _RANGE.match(part.strip())
        if not match:
            raise HostlistError(f"bad range {part!r} in {item!r}")
        low_text, high_text = match.group(1), match.group(2) or match.group(1)
        low, high = int(low_text), int(high_text)
        if high < low:
            raise HostlistError(f"descending range {part!r} in {item!r}")
        width = len(low_text) if low_text.startswith("0") and len(low_text) > 1 else 0
        numbers.extend(str(n).zfill(width) for n in range(low, high + 1))
    return numbers


def compress(hosts: Iterable[str]) -> str:
    """compress renders host names as a sorted, deduplicated hostlist expression."""
    numbered: list[tuple[str, str]] = []
    plain: set[str] = set()
    for host in hosts:
        match = _TRAILING_NUMBER.match(host)
        if match:
            numbered.append((match.group(1), match.group(2)))
        else:
            plain.add(host)
    padded = {(prefix, len(digits)) for prefix, digits in numbered if _is_padded(digits)}
    groups: dict[tuple[str, int], set[int]] = {}
    for prefix, digits in numbered:
        # "n10" joins the zero-padded group of width 2 ("n[01-10]"): padding does not change it.
        width = len(digits) if _is_padded(digits) or (prefix, len(digits)) in padded else 0
        groups.setdefault((prefix, width), set()).add(int(digits))
    parts = [((host, -1), host) for host in plain]
    for (prefix, width), numbers in groups.items():
        ordered = sorted(numbers)
        parts.append(((prefix, ordered[0]), _render_group(prefix, width, ordered)))
    return ",".join(text for _, text in sorted(parts))


def _is_padded(digits: str) -> bool:
    """_is_padded tells whether a number is written with leading zeros."""
    return len(digits) > 1 and digits.startswith("0")


def _render_group(prefix: str, width: int, numbers: list[int]) -> str:
    """_render_group renders one prefix's numbers as ``prefix[1-3,7]`` (or ``prefix1`` alone)."""
    if len(numbers) == 1:
        return f"{prefix}{str(numbers[0]).zfill(width)}"
    ranges, low, previous = [], numbers[0], numbers[0]
    for number in numbers[1:] + [None]:
        if number is not None and number == previous + 1:
            previous = number
            continue
        low_text, high_text = str(low).zfill(width), str(previous).zfill(width)
        ranges.append(low_text if low == previous else f"{low_text}-{high_text}")
        if number is not None:
            low = previous = number
    return f"{prefix}[{','.join(ranges)}]"
