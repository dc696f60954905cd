"""Shared CLI state: the chosen database and the caller's identity."""

from __future__ import annotations

from dataclasses import dataclass, field

import click

from meta.service.api import Service
from tenants.identity import Principal, local_principal


@dataclass
class CliState:
    """CliState carries global options to subcommands and opens the service lazily."""

    db_url: str | None = None
    tenant: str | None = None
    _service: Service | None = field(default=None, repr=False)

    def service(self) -> Service:
        """service opens the store on first use (so --help never touches a database)."""
        if self._service is None:
            self._service = Service.open(self.db_url)
        return self._service

    def principal(self) -> Principal:
        """principal is the caller, scoped to --tenant / METASCHED_TENANT when given."""
        return local_principal(self.tenant)


pass_state = click.make_pass_decorator(CliState, ensure=True)
