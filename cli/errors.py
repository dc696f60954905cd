"""One place that turns errors into a message and an exit code: never a traceback for users."""

from __future__ import annotations

import functools
import os
import sys
import traceback
from collections.abc import Callable
from typing import Any, TypeVar

import click
from sqlalchemy.exc import OperationalError, SQLAlchemyError

from meta.model.errors import MetaschedError
from meta.model.limits import clip
from meta.model.spec import SpecError
from meta.model.states import IllegalTransition
from meta.store.db import DatabaseURLError

F = TypeVar("F", bound=Callable[..., Any])

EXIT_OK, EXIT_ERROR, EXIT_USAGE = 0, 1, 2


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


def handle_errors(func: F) -> F:
    """handle_errors maps known errors to exit codes (2 usage/spec, 1 otherwise), hiding tracebacks."""

    @functools.wraps(func)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        try:
            return func(*args, **kwargs)
        except SpecError as exc:
            fail(f"invalid job spec: {spec_problems(exc.problems)}", EXIT_USAGE)
        except DatabaseURLError as exc:
            fail(str(exc), EXIT_USAGE)
        except MetaschedError as exc:
            fail(str(exc), exc.exit_code)
        except IllegalTransition as exc:
            fail(str(exc), EXIT_ERROR)
        except OperationalError as exc:
            fail(f"cannot use the database: {str(exc.orig).strip().splitlines()[0]}", EXIT_ERROR)
        except SQLAlchemyError as exc:
            fail(f"database error: {str(exc).splitlines()[0]}", EXIT_ERROR)
        except (click.ClickException, click.exceptions.Exit, click.exceptions.Abort, SystemExit):
            raise
        except Exception as exc:  # noqa: BLE001 - the last line of defence for users
            if os.environ.get("METASCHED_DEBUG"):
                traceback.print_exc()
            fail(f"internal error: {type(exc).__name__}: {exc} (set METASCHED_DEBUG=1 for details)", EXIT_ERROR)

    return wrapper  # type: ignore[return-value]
