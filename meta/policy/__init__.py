"""meta.policy: the pure scheduling policy (no I/O). ``schedule(snapshot, config) -> Plan``."""
