"""meta.config: settings read from files at start-up (the policy file), shared by the daemon and the simulator."""
