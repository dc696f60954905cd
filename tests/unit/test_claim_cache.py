"""ClaimCache keeps only final claims (Slurm id recorded) and forgets attempts no longer followed."""

from __future__ import annotations

from meta.cycle.reconcile.ownership import Claim, ClaimCache


def test_only_claims_with_a_recorded_slurm_id_are_kept() -> None:
    cache = ClaimCache()
    cache.add({"a1": Claim("101", 2001, "tenant-a"), "a2": Claim(None, 2002, "tenant-b")})
    # a2 may still get its Slurm id recorded: it must be read again
    assert cache.pick(["a1", "a2", "a3"]) == {"a1": Claim("101", 2001, "tenant-a")}


def test_keep_forgets_attempts_no_longer_followed() -> None:
    cache = ClaimCache()
    cache.add({"a1": Claim("101", 2001), "a2": Claim("102", 2002)})
    cache.keep({"a2"})
    assert cache.pick(["a1", "a2"]) == {"a2": Claim("102", 2002)}
