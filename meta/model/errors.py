"""Typed errors of the service API; the CLI maps each to a message and an exit code."""

from __future__ import annotations


class MetaschedError(Exception):
    """MetaschedError is the base of every error the API raises on purpose."""

    exit_code = 1


class NotFound(MetaschedError):
    """NotFound: no such job, task or attempt visible to the caller."""


class Conflict(MetaschedError):
    """Conflict: the request contradicts stored state (e.g. a reused idempotency key)."""


class InvalidRequest(MetaschedError):
    """InvalidRequest: the request is malformed or not allowed in the current state."""

    exit_code = 2


class Unschedulable(MetaschedError):
    """Unschedulable: no node of the cluster could ever run this spec (rejected at submit)."""

    exit_code = 2


class Forbidden(MetaschedError):
    """Forbidden: the caller may not do this (tenants never touch each other's jobs)."""


class StaleFencingToken(MetaschedError):
    """StaleFencingToken: a write carried a token that is no longer the attempt's current one."""


class ConcurrentModification(MetaschedError):
    """ConcurrentModification: a compare-and-swap lost a race; the unit of work may be retried."""
