"""meta.sim: the trace-driven discrete-event simulator that drives the real policy code."""
