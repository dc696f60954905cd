"""meta: metasched's core, one sub-package per role, each a layer with its own import rule.

``model`` is the shared vocabulary (specs, resources, states, kinds); ``policy`` the pure
scheduling policy; ``config`` the settings read at start-up; ``sim`` the trace-driven simulator
that runs the same policy; ``store`` the durable state; ``service`` the API the CLI and the web
view call; ``cycle`` the daemon's numbered period; ``serve`` the start-up of ``metasched serve``
that wires them together. ``tests/test_layers.py`` holds the import rules and
docs/architecture.md explains them; this module holds only this docstring.
"""
