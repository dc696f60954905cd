"""OutputHold: a success hook's "not yet" — shared by step 4 (reconcile) and step 14 (outputs) without either importing the other."""

from __future__ import annotations

from dataclasses import dataclass


@dataclass(frozen=True)
class OutputHold:
    """OutputHold is a success hook's "not yet": the attempt stays live, or with ``failure`` it fails.

    A hook returns it when the attempt's output is still being committed off the period (looked
    at again next period), or was refused (the attempt fails with that reason).
    """

    failure: str | None = None
