"""Optional pyslurm adapter: a stub that explains why it is not usable here.

PyPI's pyslurm targets Slurm 25.11 and refuses to build against 22.05 ("Slurm version mismatch"),
so the command adapter (``CliSlurmClient``) is the default and the only tested one.
"""

from __future__ import annotations

import importlib
from typing import Any

SUPPORTED_SLURM_PREFIX = "25.11"


class PyslurmUnavailable(RuntimeError):
    """PyslurmUnavailable says why the pyslurm adapter cannot be used on this host."""


class PyslurmClient:
    """PyslurmClient would implement SlurmClient on pyslurm; it only checks availability for now."""

    def __init__(self, required_prefix: str = SUPPORTED_SLURM_PREFIX) -> None:
        try:
            self._pyslurm = importlib.import_module("pyslurm")
        except ImportError as error:
            raise PyslurmUnavailable(
                "pyslurm is not installed; use slurm_bridge.commands.CliSlurmClient (the default)"
            ) from error
        version = str(getattr(self._pyslurm, "__version__", "unknown"))
        if not version.startswith(required_prefix):
            raise PyslurmUnavailable(
                f"pyslurm {version} does not match Slurm {required_prefix}; use CliSlurmClient"
            )

    def __getattr__(self, name: str) -> Any:
        """__getattr__ makes every SlurmClient method raise a clear error: not implemented yet."""
        raise NotImplementedError(f"PyslurmClient.{name} is not implemented; use CliSlurmClient")
