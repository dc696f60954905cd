"""``metasched web``: a short-lived login link to the web view, asked of the API with the caller's MUNGE credential."""

from __future__ import annotations

import socket
from urllib.parse import urlsplit

import click

from cli.context import CliState, pass_state
from cli.errors import EXIT_USAGE, fail, handle_errors
from cli.output import echo_json


@click.command(name="web")
@click.option("--json", "as_json", is_flag=True)
@pass_state
@handle_errors
def web(state: CliState, as_json: bool) -> None:
    """Print a login link to the web view (cluster map, queues, your jobs): single use, valid 10 minutes."""
    if state.is_local():
        fail("metasched web needs the API (a browser signs in through `metasched serve`); drop --db", EXIT_USAGE)
    backend = state.backend()
    link = backend.web_link()
    if as_json:
        echo_json(link)
        return
    click.echo(f"Open this link in a browser within 10 minutes (it works once, and signs you in as {link['user']}):")
    click.echo(f"    {link['url']}")
    where = urlsplit(link["url"])
    if where.hostname in ("127.0.0.1", "localhost", "::1"):
        port = where.port or 80
        click.echo(f"From another machine: ssh -L {port}:127.0.0.1:{port} {socket.gethostname()} first, then open it there.")
