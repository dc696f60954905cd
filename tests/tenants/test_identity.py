"""Caller identity: the audit actor is the effective user, whatever the environment claims."""

from __future__ import annotations

import os
import pwd

import pytest

from tenants import identity
from tenants.identity import local_principal


def test_the_actor_is_the_effective_user_not_logname_or_user(monkeypatch: pytest.MonkeyPatch) -> None:
    for variable in ("LOGNAME", "USER", "LNAME", "USERNAME"):
        monkeypatch.setenv(variable, "mallory")
    assert local_principal().name == pwd.getpwuid(os.geteuid()).pw_name != "mallory"


def test_an_effective_uid_without_a_passwd_entry_is_named_by_number(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("LOGNAME", "mallory")
    monkeypatch.setattr(identity.os, "geteuid", lambda: 4_000_123)
    monkeypatch.setattr(identity.pwd, "getpwuid", _no_entry, raising=False)
    assert local_principal().name == "uid4000123"


def _no_entry(uid: int) -> pwd.struct_passwd:
    raise KeyError(f"getpwuid(): uid not found: {uid}")


def test_the_tenant_scope_still_comes_from_the_option_or_the_environment(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setenv("METASCHED_TENANT", "tenant-b")
    assert local_principal().tenant == "tenant-b"
    assert local_principal("tenant-a").tenant == "tenant-a"
