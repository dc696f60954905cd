"""The security suite runs as real users against the identity tests' service: their fixtures, shared."""

from __future__ import annotations

# Imported, not copied: one ``metasched serve`` wiring (PostgreSQL, MUNGE, the dev cluster's
# associations) for the identity tests and the security suite alike.
from tests.identity.conftest import installed_cli, served, shared_folder

__all__ = ["installed_cli", "served", "shared_folder"]
