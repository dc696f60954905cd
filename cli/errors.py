"""One place that turns errors into a message and an exit code: never a traceback for users.

Kept free of the store and the models: an exception can only be of a class whose module was
imported, so the heavy classes are looked up in ``sys.modules`` instead of imported here.
"""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import click

from cli.client import ApiError, ApiUnreachable, BadAddress
from meta.model.errors import MetaschedError
from meta.model.limits import clip
from tenants.identity import INVALID_ACCOUNT

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2
SUBMISSION_FAILED = "Batch job submission failed"  # sbatch's words, which msbatch users grep for


def fail(message: str, code: int) -> None:
    """fail prints ``metasched: error: ...`` as one line on stderr and exits with ``code``."""
    click.echo(f"{_prog()}: error: {one_line(message)}", err=True)
    sys.exit(code)


def one_line(message: str, limit: int = 2_000) -> str:
    """one_line makes any message one printable line of at most ``limit`` characters."""
    return clip(message, limit)


def spec_problems(problems: list[str], shown: int = 3) -> str:
    """spec_problems joins a refused spec's problems on one line, the first few in full."""
    more = len(problems) - shown
    return "; ".join(problems[:shown]) + (f" (and {more} more)" if more > 0 else "")


def _prog() -> str:
    ctx = click.get_current_context(silent=True)
    return ctx.find_root().info_name if ctx and ctx.find_root().info_name else "metasched"


def refuse_submission(exc: BaseException) -> None:
    """refuse_submission exits with sbatch's line when a submit was refused (account, dependency, limits, priority); returns otherwise."""
    invalid = loaded_class("tenants.identity", "InvalidAccount")  # local mode raises it in this process
    if (isinstance(exc, ApiError) and exc.error == "InvalidAccount") or (invalid and isinstance(exc, invalid)):
        fail(f"{SUBMISSION_FAILED}: {INVALID_ACCOUNT}", EXIT_USAGE)
    dependency = loaded_class("meta.model.errors", "DependencyProblem")
    if (isinstance(exc, ApiError) and exc.error == "DependencyProblem") or (dependency and isinstance(exc, dependency)):
        fail(f"{SUBMISSION_FAILED}: Job dependency problem", EXIT_USAGE)
    if isinstance(exc, ApiError) and exc.error in _SUBMIT_LIMITS:  # a tenant's submit limits (issue 16): exit 1, as sbatch
        fail(f"{SUBMISSION_FAILED}: {exc.message}", EXIT_ERROR)
    priority = loaded_class("meta.service.priority_check", "PriorityNotAllowed")
    if (isinstance(exc, ApiError) and exc.error == "PriorityNotAllowed") or (priority and isinstance(exc, priority)):
        # a priority class or deadline without the right (issue 21): sbatch's "Invalid qos specification", exit 1
        fail(f"{SUBMISSION_FAILED}: {exc.message if isinstance(exc, ApiError) else exc}", EXIT_ERROR)


_SUBMIT_LIMITS = ("SubmitLimitExceeded", "SubmitRateLimited")


def loaded_class(module: str, name: str) -> type | None:
    """loaded_class is a class of an already imported module (None when the module was never imported)."""
    found = getattr(sys.modules.get(module), name, None)
    return found if isinstance(found, type) else None


def describe(exc: BaseException) -> tuple[str, int] | None:
    """describe maps a known error to (message, exit code): 2 for usage or spec, 1 otherwise; None if unknown."""
    if isinstance(exc, ApiError):
        return exc.message, exc.exit_code
    if isinstance(exc, BadAddress):
        return str(exc), EXIT_USAGE
    if isinstance(exc, ApiUnreachable):
        return str(exc), EXIT_ERROR
    if isinstance(exc, ModuleNotFoundError):  # the thin CLI (deploy/install-cli) has click only
        return (f"this needs the full metasched install (no module {exc.name!r} here): "
                "run `deploy/install-cli --full`"), EXIT_ERROR
    known: list[tuple[str, str, Callable[[Any], tuple[str, int]]]] = [
        ("cli.credentials", "CredentialError", lambda e: (str(e), EXIT_ERROR)),
        ("cli.local", "LocalModeRefused", lambda e: (str(e), EXIT_USAGE)),
        ("meta.model.spec", "SpecError", lambda e: (f"invalid job spec: {spec_problems(e.problems)}", EXIT_USAGE)),
        ("meta.model.job_text", "JobFileError", lambda e: (f"invalid job spec: (file) {e}", EXIT_USAGE)),
        ("meta.store.db", "DatabaseURLError", lambda e: (str(e), EXIT_USAGE)),
        ("meta.model.states", "IllegalTransition", lambda e: (str(e), EXIT_ERROR)),
        ("sqlalchemy.exc", "OperationalError",
         lambda e: (f"cannot use the database: {str(e.orig).strip().splitlines()[0]}", EXIT_ERROR)),
        ("sqlalchemy.exc", "SQLAlchemyError", lambda e: (f"database error: {str(e).splitlines()[0]}", EXIT_ERROR)),
    ]
    if isinstance(exc, MetaschedError):
        return str(exc), exc.exit_code
    for module, name, render in known:
        kind = loaded_class(module, name)
        if kind is not None and isinstance(exc, kind):
            return render(exc)
    return None


def handle_errors(func: F) -> F:
    """handle_errors maps known errors to exit codes (2 usage/spec, 1 otherwise), hiding tracebacks."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - the last line of defence for users
            known = describe(exc)
            if known is not None:
                fail(*known)
            if os.environ.get("METASCHED_DEBUG"):
                traceback.print_exc()
            fail(f"internal error: {type(exc).__name__}: {exc} (set METASCHED_DEBUG=1 for details)", EXIT_ERROR)

    return wrapper  # type: ignore[return-value]
