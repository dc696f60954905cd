"""The daemon's scheduling period: one value the daemon and the simulator both start from."""

from __future__ import annotations

# `metasched serve --period`: a cycle every 2 s. The simulator decides on the same grid, so the
# delay it charges a job for waiting on the next cycle is the daemon's, not Slurm's 60 s.
DEFAULT_PERIOD_S = 2.0
# With work waiting and nothing arriving or ending, the simulator still decides every so often,
# so aging, deadlines and holds move with time as they do in the daemon (which decides every
# period; deciding every 2 s of a simulated week would cost ~300,000 policy calls).
DEFAULT_IDLE_CYCLE_S = 60.0
