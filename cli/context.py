"""Shared CLI state: where the API is, whether a store was named (local mode), and the acting tenant."""

from __future__ import annotations

import os
from dataclasses import dataclass, field
from typing import TYPE_CHECKING, Any

import click

from cli.client import API_ENV, DEFAULT_API
from cli.remote import ApiBackend
from meta.model.errors import InvalidRequest

if TYPE_CHECKING:  # the store is imported only by the commands that use it (through cli.local)
    from cli.local import Service

DB_FILE_ENV = "METASCHED_DB_FILE"
JOB_SIDE_WAIT_S = 60.0  # a replica restarting on the same socket is back within seconds


@dataclass
class CliState:
    """CliState carries global options to subcommands and opens the API client or the store lazily."""

    db_url: str | None = None
    tenant: str | None = None
    api: str | None = None
    _service: Any = field(default=None, repr=False)

    def is_local(self) -> bool:
        """is_local tells whether a store was named explicitly (--db, METASCHED_DB, METASCHED_DB_FILE)."""
        return bool(self.db_url or os.environ.get(DB_FILE_ENV))

    def api_address(self) -> str:
        """api_address is --api, else METASCHED_API, else the default Unix socket."""
        return self.api or os.environ.get(API_ENV) or DEFAULT_API

    def service(self) -> Service:
        """service opens the store on first use (daemon and local-mode commands only)."""
        if self._service is None:
            from cli.local import open_store

            self._service = open_store(self.db_url)
        return self._service

    def backend(self, secrets_root: str | None = None, *, job_side: bool = False) -> ApiBackend:
        """backend is the API: over its socket (the normal way) or, with an explicit store, in process (local mode, root).

        ``job_side``: a running job's call (commit, checkpoint report, its secrets) waits up to
        JOB_SIDE_WAIT_S for a daemon that is restarting rather than failing the job at once.
        """
        if self.is_local():
            from cli.local import check_store, local_backend

            check_store(self.db_url)
            return local_backend(self.service(), self.tenant, secrets_root)
        if secrets_root is not None:
            raise InvalidRequest("--root applies to local mode (--db) only: the service uses its own --secrets-root")
        from cli.client import ApiClient

        wait = JOB_SIDE_WAIT_S if job_side else 0.0
        return ApiBackend(ApiClient(self.api_address(), connect_wait_s=wait), self.tenant)


pass_state = click.make_pass_decorator(CliState, ensure=True)
