"""Names that arrive from users: tenants, secret names and Unix user names, checked in full before any use.

Patterns are applied with ``fullmatch``: with ``match`` and a ``$`` anchor, ``"evil\\n"`` would
pass, because ``$`` also matches just before a trailing newline.
"""

from __future__ import annotations

import re

from meta.model.errors import InvalidRequest

TENANT_NAME = re.compile(r"[A-Za-z0-9][A-Za-z0-9._-]{0,127}")
SECRET_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9_]{0,127}")  # an environment variable name
_RESERVED_SECRET_PREFIX = "METASCHED_"  # metasched's own job environment
USER_NAME = re.compile(r"[A-Za-z_][A-Za-z0-9._-]{0,31}")  # a portable POSIX login name, as useradd takes


def check_tenant_name(name: str) -> str:
    """check_tenant_name returns ``name`` when it is a valid tenant name, else raises InvalidRequest."""
    if not TENANT_NAME.fullmatch(name):
        raise InvalidRequest(f"invalid tenant name {name!r}: use letters, digits, '.', '_' and '-' (at most 128)")
    return name


def check_secret_name(name: str) -> str:
    """check_secret_name returns ``name`` when it is a valid secret name, else raises InvalidRequest."""
    if not SECRET_NAME.fullmatch(name) or name.startswith(_RESERVED_SECRET_PREFIX):
        raise InvalidRequest(
            f"invalid secret name {name!r}: use an environment variable name (not METASCHED_*, at most 128)"
        )
    return name


def check_user_name(name: str) -> str:
    """check_user_name returns ``name`` when it is a valid Unix user name, else raises InvalidRequest."""
    if not USER_NAME.fullmatch(name):
        raise InvalidRequest(
            f"invalid user name {name!r}: use a Unix login name (letters, digits, '.', '_', '-'; at most 32)"
        )
    return name
