"""meta.cycle: the daemon's loop (``daemon.py``) and one module per numbered step of its period."""
