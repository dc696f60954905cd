"""Sharing a trace: tenants, users, job names and ids replaced by a keyed hash whose key is never kept."""

from __future__ import annotations

import hashlib
import hmac
import secrets
from dataclasses import replace

from meta.plan.history import HistoryExport, HistoryRow

DIGEST_CHARS = 12  # 48 bits: no collision to speak of among a site's tenants, users or jobs


class Anonymizer:
    """Anonymizer maps names to HMAC-SHA256 digests under one random key, held in memory only."""

    def __init__(self, key: bytes | None = None) -> None:
        # a fresh key per export: two exports cannot be joined, and nobody can test a guessed name
        self._key = key if key is not None else secrets.token_bytes(32)

    def name(self, field: str, value: str) -> str:
        """name is ``value``'s digest; the field keeps a tenant and a user of the same name apart."""
        if not value:
            return ""
        digest = hmac.new(self._key, f"{field}\0{value}".encode(), hashlib.sha256).hexdigest()
        return f"{field[0]}{digest[:DIGEST_CHARS]}"

    def row(self, row: HistoryRow) -> HistoryRow:
        """row hides a row's tenant, user, job name and job id (an array element keeps its index)."""
        job, _, element = row.job_id.partition("_")
        job_id = self.name("job", job) + (f"_{element}" if element else "")
        return replace(row, job_id=job_id, tenant=self.name("tenant", row.tenant),
                       user=self.name("user", row.user), name=self.name("name", row.name))


def anonymized(export: HistoryExport, anonymizer: Anonymizer | None = None) -> HistoryExport:
    """anonymized is the export with every row's identifying fields hashed (a fresh key unless given)."""
    hasher = anonymizer or Anonymizer()
    return replace(export, rows=[hasher.row(row) for row in export.rows])
