"""Policy knobs from a file: a YAML (or JSON) mapping of SchedulerConfig fields over a base config.

Admins tune the policy without code: ``metasched serve --policy-config FILE`` and
``metasched simulate --policy-config FILE`` read the same file, so what was measured in the
simulator is what the daemon runs. Unknown names and wrong types are errors, never ignored.
"""

from __future__ import annotations

import difflib
import math
from collections.abc import Iterator
from dataclasses import asdict, fields
from pathlib import Path
from typing import Any

import yaml
from pydantic import TypeAdapter, ValidationError

from meta.policy.config import SchedulerConfig

SETTINGS = tuple(f.name for f in fields(SchedulerConfig))
_ADAPTER = TypeAdapter(SchedulerConfig)


class PolicyFileError(ValueError):
    """PolicyFileError says what is wrong with a policy file, one problem per line."""


def load_policy_config(path: str | Path, base: SchedulerConfig | None = None) -> SchedulerConfig:
    """load_policy_config reads ``path`` and applies its settings over ``base`` (the defaults)."""
    file = Path(path)
    try:
        data = yaml.safe_load(file.read_text(encoding="utf-8"))
    except OSError as exc:
        raise PolicyFileError(f"{file}: cannot read: {exc.strerror or exc}") from None
    except yaml.YAMLError as exc:
        raise PolicyFileError(f"{file}: not valid YAML or JSON: {exc}") from None
    return policy_config_from(data or {}, base, source=str(file))


def policy_config_from(data: Any, base: SchedulerConfig | None = None, source: str = "policy") -> SchedulerConfig:
    """policy_config_from validates a mapping of settings and applies it over ``base``."""
    if not isinstance(data, dict):
        raise PolicyFileError(f"{source}: want a mapping of settings, got {type(data).__name__}")
    problems = [_unknown(name) for name in data if name not in SETTINGS]
    if problems:
        raise PolicyFileError("\n".join(f"{source}: {p}" for p in problems))
    merged = asdict(base or SchedulerConfig()) | data
    try:
        config = _ADAPTER.validate_python(merged)
    except ValidationError as exc:
        lines = [f"{source}: {'.'.join(map(str, e['loc']))}: {e['msg']}" for e in exc.errors()]
        raise PolicyFileError("\n".join(lines)) from None
    # checked after parsing: YAML reads 1e400 as text, which becomes infinity only here
    odd = [f"{source}: {where}: must be a finite number, not {value}" for where, value in _non_finite(asdict(config))]
    if odd:
        raise PolicyFileError("\n".join(odd))
    return config


def _non_finite(value: Any, where: str = "") -> Iterator[tuple[str, float]]:
    """_non_finite yields (setting path, value) for each NaN or infinity in settings (YAML's .nan, .inf, 1e400).

    A NaN compares false with every bound, so a range check would let it through (issue 22, S13).
    """
    if isinstance(value, float) and not math.isfinite(value):
        yield where, value
    elif isinstance(value, dict):
        for key, item in value.items():
            yield from _non_finite(item, f"{where}.{key}" if where else str(key))
    elif isinstance(value, list | tuple):
        for index, item in enumerate(value):
            yield from _non_finite(item, f"{where}[{index}]")


def _unknown(name: object) -> str:
    """_unknown names a setting that does not exist, with the closest real one."""
    close = difflib.get_close_matches(str(name), SETTINGS, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown setting {name!r}{hint}"
