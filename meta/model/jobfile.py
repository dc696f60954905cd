"""Reading a job file safely: bounded size, strict UTF-8, no YAML aliases, bounded nesting.

The text is YAML or JSON (JSON is YAML). Before anything is built from it, its parse events
are streamed once: an alias (``*name``, the root of "billion laughs" bombs), nesting deeper
than MAX_DEPTH or more than MAX_NODES values stops the read at once, so a hostile file costs
milliseconds and no memory. Booleans are YAML 1.2's (``on``/``yes`` stay strings).
"""

from __future__ import annotations

import re
from typing import Any

import yaml

from meta.model.job_text import JobFileError, decode_job_text, read_job_bytes
from meta.model.limits import MAX_DEPTH, MAX_JOB_FILE_BYTES, MAX_NODES, clip

__all__ = ["JobFileError", "decode_job_text", "parse_job_text", "read_job_bytes"]

_FAST = getattr(yaml, "CSafeLoader", None)  # libyaml: ~6x faster; the pure-Python loader otherwise
_BASE_LOADER: type = _FAST or yaml.SafeLoader


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
        if _library_depth_limit(exc):
            # libyaml >= 0.2.6 (PyYAML 6.0.4's wheels) stops at its own nesting limit (1,000) while
            # scanning ahead, before our event check sees depth MAX_DEPTH + 1: the same refusal
            raise JobFileError(f"{source}: nested deeper than {MAX_DEPTH} levels") from None
        raise JobFileError(clip(f"{source}: not valid YAML or JSON: {exc}")) from None
    except (ValueError, OverflowError, RecursionError, MemoryError) as exc:
        # e.g. an integer of more digits than Python converts (ValueError), or a date out of range
        raise JobFileError(clip(f"{source}: cannot read a value: {exc}")) from None


def _library_depth_limit(exc: yaml.YAMLError) -> bool:
    """_library_depth_limit tells whether the YAML library refused the text for its own nesting limit."""
    problem = getattr(exc, "problem", None) or str(exc)
    return "maximum nesting depth" in problem


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
