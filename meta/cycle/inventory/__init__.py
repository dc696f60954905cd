"""Cycle step 2, inventory: one ``sinfo --json`` stored, minus the capacity foreign jobs hold (``reader.py``).

The package also holds step 3, shares (``shares.py``): the tenants' weights and GPU limits read
from Slurm's accounts at the inventory's topology cadence.
"""
