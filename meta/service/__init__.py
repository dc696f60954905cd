"""meta.service: the API service that the CLI, jobs and the web view call, in every ``metasched serve``.

``api`` (``Service``: submit, status, list, cancel, retry) with its read models (``views``) and
submit-time checks (``submission``, ``feasibility``, ``submit_gate``, ``dependency_check``);
``operations``, every operation for one authenticated caller, which the HTTP routes and the
CLI's local mode share, over ``explain``, ``artifacts``, ``jobside`` (fenced job-side calls),
``job_holds``, ``tenant_admin`` and ``secret_admin``; the HTTP layer (``http``, ``op_routes``,
``http_guard``, ``http_errors``, ``http_metrics``, ``server``) and the web view (``web/``).
"""
