"""When a slow read of the inventory steps is due: at the first period, then every ``every_s``."""

from __future__ import annotations


class Cadence:
    """Cadence says when a step that runs every ``every_s`` (monotonic seconds) is due."""

    def __init__(self, every_s: float) -> None:
        self.every_s = every_s
        self._at: float | None = None

    def due(self, now: float) -> bool:
        """due is true at the first call and then once ``every_s`` has passed since the last due call.

        A step whose read then fails waits for the next one too: sacctmgr is slow when slurmdbd is down.
        """
        if self._at is not None and now - self._at < self.every_s:
            return False
        self._at = now
        return True
