"""What msqueue and mscancel share: the backend, the caller's name, squeue-style lists and errors."""

from __future__ import annotations

import os
import re
import subprocess
import sys
from collections.abc import Iterable

import click

from cli.client import API_ENV, DEFAULT_API, ApiClient
from cli.context import DB_FILE_ENV
from cli.remote import ApiBackend

_LIST_ITEM = re.compile(r"(?:[^,\[]|\[[^\]]*\])+")  # items between commas outside brackets


def view_backend(api: str | None) -> ApiBackend:
    """view_backend is the API (--api, METASCHED_API, the default socket) or, with METASCHED_DB, local mode's in-process API."""
    url = os.environ.get("METASCHED_DB")
    if url or os.environ.get(DB_FILE_ENV):
        from cli.local import local_backend, open_service

        return local_backend(open_service(url), None)
    return ApiBackend(ApiClient(api or os.environ.get(API_ENV) or DEFAULT_API))


def my_name(backend: ApiBackend) -> str:
    """my_name is the caller's user name as the API authenticated it (``--me``)."""
    return str(backend.whoami()["user"])


def split_list(values: Iterable[str]) -> list[str]:
    """split_list reads repeated and comma-separated values (``-u a,b -u c``) in order, without blanks.

    A comma inside brackets belongs to an array element id (``j1_[1,3],j2`` is two ids).
    """
    return [item.strip() for value in values for item in _LIST_ITEM.findall(value) if item.strip()]


def default_partition() -> str | None:
    """default_partition is the cluster's default partition (``sinfo``'s one marked ``*``), None if unknown."""
    try:
        out = subprocess.run(["sinfo", "-h", "-o", "%P"], capture_output=True, text=True, timeout=30).stdout
    except (OSError, subprocess.SubprocessError):
        return None
    return next((line.strip().rstrip("*") for line in out.splitlines() if line.strip().endswith("*")), None)


def error(prog: str, message: str, code: int = 1) -> None:
    """error prints ``<prog>: error: <message>`` (squeue/scancel's form) and exits with ``code``."""
    click.echo(f"{prog}: error: {message}", err=True)
    sys.exit(code)
