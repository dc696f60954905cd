"""The daemon's settings file: TOML, one top-level key per ``ServeSettings`` field (``deploy/metasched.toml.example``).

``metasched serve --config FILE`` (or ``METASCHED_CONFIG``) reads it; flags override it. A key that
is not a setting, a value of the wrong type or out of its range refuses the whole file, in one
line naming the file and the key: a typo must never silently leave a default in force.
"""

from __future__ import annotations

import difflib
import math
import tomllib
import typing
from dataclasses import replace
from pathlib import Path
from typing import Any

from meta.model.durations import parse_duration_s
from meta.serve.settings import CHOICES, DEFAULTS, LIMITS, NAMES, OFF_WORDS, ServeSettings, check_site_name

CONFIG_ENV = "METASCHED_CONFIG"
SITE_CONFIG = "/etc/metasched/metasched.toml"  # a production install's file (deploy/systemd/metasched.service)
_HINTS = typing.get_type_hints(ServeSettings)


class SettingsFileError(ValueError):
    """SettingsFileError says in one line what is wrong with a settings file."""


def load_settings(path: str | Path) -> ServeSettings:
    """load_settings reads a TOML settings file over the defaults (raises SettingsFileError)."""
    file = Path(path)
    try:
        text = file.read_bytes().decode("utf-8")
    except OSError as exc:
        raise SettingsFileError(f"{file}: cannot read: {exc.strerror or exc}") from None
    except UnicodeDecodeError:
        raise SettingsFileError(f"{file}: not UTF-8 text") from None
    try:
        data = tomllib.loads(text)
    except tomllib.TOMLDecodeError as exc:
        raise SettingsFileError(f"{file}: not valid TOML: {exc}") from None
    return settings_from(data, source=str(file))


def settings_from(data: dict[str, Any], source: str = "settings") -> ServeSettings:
    """settings_from validates a mapping of settings and applies it over the defaults."""
    problems: list[str] = []
    values: dict[str, Any] = {}
    for name, value in data.items():
        if name not in NAMES:
            problems.append(_unknown(name))
            continue
        try:
            values[name] = checked(name, value)
        except ValueError as exc:
            problems.append(f"{name}: {exc}")
    if problems:  # all of them at once, still on one line
        raise SettingsFileError(f"{source}: {'; '.join(problems)}")
    return replace(DEFAULTS, **values)


def checked(name: str, value: Any) -> Any:
    """checked is a file's value of setting ``name`` in the setting's type, or raises ValueError."""
    hint = _HINTS[name]
    if hint is float:
        if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value):
            raise ValueError(f"want a number, got {_shown(value)}")
        value = float(value)
    elif hint is int:
        if isinstance(value, bool) or not isinstance(value, int):
            raise ValueError(f"want a whole number, got {_shown(value)}")
    elif hint in (str, str | None):
        if not isinstance(value, str):
            raise ValueError(f"want a string, got {_shown(value)}")
    elif hint == tuple[str, ...]:
        if not isinstance(value, list) or not all(isinstance(item, str) for item in value):
            raise ValueError(f"want a list of strings, got {_shown(value)}")
        value = tuple(item.strip() for item in value if item.strip())
    else:  # a new field of a type this reader does not know yet
        raise TypeError(f"ServeSettings.{name}: no file reader for {hint}")
    _check_range(name, value)
    return value


def retention_s(text: str) -> float | None:
    """retention_s is the decision log's age bound in seconds, None for no bound (raises ValueError)."""
    if text.strip().lower() in OFF_WORDS:
        return None
    return parse_duration_s(text)


def _check_range(name: str, value: Any) -> None:
    """_check_range refuses a value outside the setting's LIMITS or CHOICES."""
    least, most = LIMITS.get(name, (None, None))
    if (least is not None and value < least) or (most is not None and value > most):
        bound = f"between {least:g} and {most:g}" if least is not None and most is not None else (
            f"at least {least:g}" if least is not None else f"at most {most:g}")
        raise ValueError(f"must be {bound}, got {value!r}")
    if name in CHOICES and value not in CHOICES[name]:
        raise ValueError(f"must be one of {', '.join(CHOICES[name])}, got {value!r}")
    if name == "decision_retention":
        retention_s(value)  # its ValueError says what a duration looks like
    if name == "site_name":
        check_site_name(value)


def _shown(value: Any) -> str:
    """_shown names a wrong value with its TOML type, briefly."""
    kind = {bool: "boolean", str: "string", list: "array", dict: "table"}.get(type(value), type(value).__name__)
    return f"{kind} {value!r}"[:80]


def _unknown(name: str) -> str:
    """_unknown names a key that is not a setting, with the closest real one."""
    close = difflib.get_close_matches(name, NAMES, n=1)
    hint = f" (did you mean {close[0]!r}?)" if close else ""
    return f"unknown setting {name!r}{hint}"
