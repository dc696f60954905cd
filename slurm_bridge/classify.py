"""Classify a failed Slurm command by its message into rejected, transient or unknown outcome.

Slurm's CLIs exit 1 for almost everything, so the message is the only signal. Patterns are
matched case-insensitively against stderr and stdout together. Transient patterns are checked
first: "Batch job submission failed: Resource temporarily unavailable" is a retry, not a no.
"""

from __future__ import annotations

import re

from slurm_bridge.call_records import CallOutcome

# A reply that may have been lost after the controller acted on the request: for a mutating
# command this is an unknown outcome, for a read it is a plain retry.
_LOST_REPLY = [
    r"socket timed out on send/recv",
    r"zero bytes were transmitted or received",
    r"connection reset by peer",
]

# The request never reached (or was never accepted by) the controller or slurmdbd.
_TRANSIENT = [
    r"unable to contact slurm controller",
    r"resource temporarily unavailable",
    r"connection refused",
    r"slurm temporarily unable to accept job",
    r"slurm backup controller in standby mode",
    r"transport endpoint is not connected",
    r"communication connection failure",
    r"problem talking to the database",
    r"slurmdbd.*(not responding|unable|connection|down)",
    r"unable to connect to.*slurmdbd",
    r"no route to host",
    r"network is unreachable",
    r"controller is busy",
    r"munge.*(socket|connect|unavailable)",
]

# Slurm understood the request and refused it.
_REJECTED = [
    r"invalid account",
    r"invalid qos",
    r"invalid partition",
    r"requested node configuration is not available",
    r"invalid generic resource",
    r"invalid trackable resource",
    r"invalid node name",
    r"invalid job id",
    r"invalid user id",
    r"invalid reservation",
    r"requested reservation is invalid",
    r"reservation request has invalid",
    r"requested nodes are busy",
    r"job violates accounting/qos policy",
    r"requested time limit is invalid",
    r"requested partition configuration not available",
    r"memory specification can not be satisfied",
    r"node count specification invalid",
    r"more processors requested than permitted",
    r"access/permission denied",
    r"access denied",
    r"permission denied",
    r"user's group not permitted",
    r"unrecognized option",
    r"invalid option",
    r"unknown option",
    r"invalid argument",
    r"invalid .*specification",
    r"kill job error",
    r"already completing or completed",
    r"duplicate reservation name",
    r"reservation already started",
    r"reservation is in use",
    r"reservation request overlaps",
    r"reservation .*not found",
]


def _compile(patterns: list[str]) -> re.Pattern[str]:
    """_compile joins patterns into one case-insensitive alternation."""
    return re.compile("|".join(f"(?:{p})" for p in patterns), re.IGNORECASE)


_LOST_REPLY_RE = _compile(_LOST_REPLY)
_TRANSIENT_RE = _compile(_TRANSIENT)
_REJECTED_RE = _compile(_REJECTED)


def classify_message(message: str, *, mutating: bool) -> CallOutcome:
    """classify_message maps a failed command's output to an outcome class."""
    if _LOST_REPLY_RE.search(message):
        return CallOutcome.UNKNOWN if mutating else CallOutcome.TRANSIENT
    if _TRANSIENT_RE.search(message):
        return CallOutcome.TRANSIENT
    if _REJECTED_RE.search(message):
        return CallOutcome.REJECTED
    return CallOutcome.FAILED


def first_error_line(message: str) -> str:
    """first_error_line picks the most telling line ("error:" lines first) for error messages."""
    lines = [line.strip() for line in message.splitlines() if line.strip()]
    for line in lines:
        if "error" in line.lower():
            return line
    return lines[0] if lines else ""
