"""Fixtures of the fault suite: the real dev cluster, its lock and the in-process harness.

Every scenario takes ``slurm_exclusive`` (directly or through ``harness``): a daemon cancels
Slurm jobs it does not own, and several scenarios restart PostgreSQL or slurmctld. The cluster
fixtures live in tests/integration/conftest.py or, once shared, in tests/conftest.py (seen by
every test); they are re-exported here only where they are not global.
"""

from __future__ import annotations

import tests.integration.conftest as integration
from tests.integration.conftest import harness

__all__ = ["harness"]

for _name in ("slurm_cluster", "slurm_exclusive"):
    if hasattr(integration, _name):
        globals()[_name] = getattr(integration, _name)
        __all__.append(_name)
