"""Reading a job file safely: bounded size, strict UTF-8, no YAML aliases, bounded nesting.

The text is YAML or JSON (JSON is YAML). Before anything is built from it, its parse events
are streamed once: an alias (``*name``, the root of "billion laughs" bombs), nesting deeper
than MAX_DEPTH or more than MAX_NODES values stops the read at once, so a hostile file costs
milliseconds and no memory. Booleans are YAML 1.2's (``on``/``yes`` stay strings).
"""

from __future__ import annotations

import re
from pathlib import Path
from typing import Any

import yaml

from meta.model.limits import MAX_DEPTH, MAX_JOB_FILE_BYTES, MAX_NODES, clip

_FAST = getattr(yaml, "CSafeLoader", None)  # libyaml: ~6x faster; the pure-Python loader otherwise
_BASE_LOADER: type = _FAST or yaml.SafeLoader


class JobFileError(ValueError):
    """JobFileError is a job file that cannot be read or parsed; the message is one line."""


class _Yaml12Loader(_BASE_LOADER):  # type: ignore[misc, valid-type]
    """_Yaml12Loader reads booleans as YAML 1.2 does: ``on``/``off``/``yes``/``no`` stay strings."""


_Yaml12Loader.yaml_implicit_resolvers = {
    first: [(tag, regexp) for tag, regexp in resolvers if tag != "tag:yaml.org,2002:bool"]
    for first, resolvers in yaml.SafeLoader.yaml_implicit_resolvers.items()
}
_Yaml12Loader.add_implicit_resolver(
    "tag:yaml.org,2002:bool", re.compile(r"^(?:true|True|TRUE|false|False|FALSE)$"), list("tTfF")
)
_OPEN = (yaml.MappingStartEvent, yaml.SequenceStartEvent)
_CLOSE = (yaml.MappingEndEvent, yaml.SequenceEndEvent)


def read_job_bytes(path: str | Path) -> bytes:
    """read_job_bytes reads at most MAX_JOB_FILE_BYTES of a file, refusing a larger one."""
    try:
        with open(path, "rb") as handle:
            data = handle.read(MAX_JOB_FILE_BYTES + 1)
    except OSError as exc:
        raise JobFileError(f"{path}: cannot read: {exc.strerror or exc}") from None
    if len(data) > MAX_JOB_FILE_BYTES:
        raise JobFileError(f"{path}: larger than {MAX_JOB_FILE_BYTES // 1024} KiB")
    return data


def decode_job_text(data: bytes, source: str) -> str:
    """decode_job_text decodes strict UTF-8 (a BOM is allowed) and refuses NUL bytes."""
    try:
        text = data.decode("utf-8-sig")
    except UnicodeDecodeError as exc:
        raise JobFileError(f"{source}: not valid UTF-8 (byte {exc.start})") from None
    if "\x00" in text:
        raise JobFileError(f"{source}: contains a NUL byte")
    return text


def parse_job_text(text: str, source: str = "<job>") -> Any:
    """parse_job_text turns bounded YAML/JSON text into plain data, or raises JobFileError."""
    if len(text.encode("utf-8", "surrogatepass")) > MAX_JOB_FILE_BYTES:
        raise JobFileError(f"{source}: larger than {MAX_JOB_FILE_BYTES // 1024} KiB")
    try:
        _check_events(text, source)
        return yaml.load(text, Loader=_Yaml12Loader)  # noqa: S506 - a SafeLoader (C or Python) subclass
    except JobFileError:
        raise
    except yaml.YAMLError as exc:
        raise JobFileError(clip(f"{source}: not valid YAML or JSON: {exc}")) from None
    except (ValueError, OverflowError, RecursionError, MemoryError) as exc:
        # e.g. an integer of more digits than Python converts (ValueError), or a date out of range
        raise JobFileError(clip(f"{source}: cannot read a value: {exc}")) from None


def _check_events(text: str, source: str) -> None:
    """_check_events streams the parse events and stops at an alias, deep nesting or too many values."""
    depth = nodes = 0
    for event in yaml.parse(text, Loader=_BASE_LOADER):
        if isinstance(event, yaml.AliasEvent):
            raise JobFileError(f"{source}: YAML aliases (*{event.anchor}) are not allowed in job files")
        if isinstance(event, _OPEN):
            depth += 1
            if depth > MAX_DEPTH:
                raise JobFileError(f"{source}: nested deeper than {MAX_DEPTH} levels")
        elif isinstance(event, _CLOSE):
            depth -= 1
        nodes += 1
        if nodes > MAX_NODES:
            raise JobFileError(f"{source}: more than {MAX_NODES} values")
