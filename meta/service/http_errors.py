"""How the API answers an error: ``{"error": "<Type>", "message": "<one line>"}`` and a status code.

The status tells the client's exit code (docs/identity.md §2): 400 and 422 are the caller's
request (CLI exit 2); 401, 403, 404, 409 and 5xx are everything else (exit 1). Another tenant's
job is a 404, never a 403: its existence does not leak.
"""

from __future__ import annotations

import logging
import math
from typing import Any

from sqlalchemy.exc import OperationalError, SQLAlchemyError

from meta.model.errors import (
    ConcurrentModification,
    Conflict,
    Forbidden,
    InvalidRequest,
    MetaschedError,
    NotFound,
    StaleFencingToken,
    Unschedulable,
)
from meta.model.limits import clip
from meta.model.spec import SpecError
from meta.model.states import IllegalTransition
from meta.service.submit_gate import SubmitLimitExceeded, SubmitRateLimited, SubmitRefused
from tenants.associations import AccountingUnavailable
from tenants.auth import Unauthenticated
from tenants.munge import MungeUnavailable

log = logging.getLogger("metasched.api")

MAX_MESSAGE_CHARS = 2_000
_SHOWN_PROBLEMS = 3

# most specific first: the first class an error is an instance of decides
_STATUS: tuple[tuple[type[BaseException], int], ...] = (
    # the service's own munged or slurmdbd cannot be asked: not the caller's fault, try again
    (MungeUnavailable, 503),
    (AccountingUnavailable, 503),
    (Unauthenticated, 401),
    (SpecError, 400),
    (InvalidRequest, 400),
    (Unschedulable, 422),
    # a tenant over its submit rate may retry after Retry-After; over its pending-job limit, once jobs end
    (SubmitRateLimited, 429),
    (SubmitLimitExceeded, 403),
    (Forbidden, 403),
    (NotFound, 404),
    (StaleFencingToken, 409),
    (ConcurrentModification, 409),
    (Conflict, 409),
    (IllegalTransition, 409),
)


def error_body(kind: str, message: str, **extra: Any) -> dict[str, Any]:
    """error_body is the JSON of one error: its type and a one-line message."""
    return {"error": kind, "message": clip(message, MAX_MESSAGE_CHARS), **extra}


def describe(exc: BaseException) -> tuple[int, dict[str, Any]]:
    """describe maps an exception to (status, body); an unexpected one is logged and answered 500."""
    if isinstance(exc, SpecError):
        shown = "; ".join(exc.problems[:_SHOWN_PROBLEMS])
        more = len(exc.problems) - _SHOWN_PROBLEMS
        message = f"invalid job spec: {shown}" + (f" (and {more} more)" if more > 0 else "")
        problems = [clip(problem, MAX_MESSAGE_CHARS) for problem in exc.problems[:100]]
        return 400, error_body("SpecError", message, problems=problems)
    if isinstance(exc, SubmitRefused):
        refusal = exc.refusal
        wait = None if refusal.retry_after_s is None else round(refusal.retry_after_s, 3)
        return (429 if isinstance(exc, SubmitRateLimited) else 403), error_body(
            type(exc).__name__, str(exc), reason=refusal.reason, retry_after_s=wait
        )
    for kind, status in _STATUS:
        if isinstance(exc, kind):
            return status, error_body(type(exc).__name__, str(exc) or type(exc).__name__)
    if isinstance(exc, MetaschedError):  # a newer typed error: its exit code says whose fault it is
        return (400 if exc.exit_code == 2 else 409), error_body(type(exc).__name__, str(exc))
    if isinstance(exc, OperationalError):
        # the cause stays in the service's log: it names hosts and roles the caller has no business with
        log.error("database unavailable: %s", str(exc.orig).strip().splitlines()[0] if exc.orig else exc)
        return 503, error_body("Unavailable", "the service cannot reach its database; try again")
    if isinstance(exc, SQLAlchemyError):
        log.error("database error: %s", str(exc).splitlines()[0])
        return 500, error_body("InternalError", "database error (see the service log)")
    log.error("internal error answering a request", exc_info=exc)
    return 500, error_body("InternalError", f"internal error: {type(exc).__name__} (see the service log)")


def error_headers(exc: BaseException) -> dict[str, str]:
    """error_headers are an error answer's headers: ``Retry-After`` (whole seconds, rounded up) for a rate refusal."""
    if isinstance(exc, SubmitRateLimited) and exc.refusal.retry_after_s is not None:
        return {"Retry-After": str(max(1, math.ceil(exc.refusal.retry_after_s)))}
    return {}
