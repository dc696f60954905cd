"""Reading the running attempt's identity and proof from the environment metasched gives every job."""

from __future__ import annotations

import os

import click

from meta.model.errors import InvalidRequest


def attempt_identity(attempt: str | None, token: int | None) -> tuple[str, int]:
    """attempt_identity is (attempt id, fencing token) from options, else METASCHED_ATTEMPT_ID/_FENCING_TOKEN."""
    attempt_id = attempt or os.environ.get("METASCHED_ATTEMPT_ID")
    raw_token = token if token is not None else os.environ.get("METASCHED_FENCING_TOKEN")
    if not attempt_id or raw_token is None:
        raise InvalidRequest("no attempt identity: run inside a metasched job or pass --attempt and --token")
    try:
        return attempt_id, int(raw_token)
    except ValueError:
        raise InvalidRequest(f"fencing token {raw_token!r} is not an integer") from None


SECRET_ENV = "METASCHED_ATTEMPT_SECRET"


def attempt_secret() -> str | None:
    """attempt_secret is the job's proof of its attempt (METASCHED_ATTEMPT_SECRET, set in its batch script)."""
    return os.environ.get(SECRET_ENV) or None


attempt_option = click.option("--attempt", default=None, help="Attempt id (default: $METASCHED_ATTEMPT_ID).")
token_option = click.option(
    "--token", type=int, default=None, help="Fencing token (default: $METASCHED_FENCING_TOKEN)."
)
