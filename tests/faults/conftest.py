"""Fixtures of the fault suite: the real dev cluster and its lock, from tests/integration.

Every scenario takes ``slurm_exclusive`` (directly or through ``harness``): a daemon cancels
Slurm jobs it does not own, and several scenarios restart PostgreSQL or slurmctld.
"""

from __future__ import annotations

from tests.integration.conftest import harness, slurm_cluster, slurm_exclusive

__all__ = ["harness", "slurm_cluster", "slurm_exclusive"]
