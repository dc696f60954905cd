"""meta.serve: the daemon's start-up (``metasched serve``): its settings and their file, the state folder, the API's wiring, the run."""
