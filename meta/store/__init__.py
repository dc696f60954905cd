"""meta.store: durable state in PostgreSQL (production) or a SQLite file (the embedded default).

SQLAlchemy models (``models``) and Alembic migrations (``migrations/``, ``migrate``), engines and
sessions (``db``), compare-and-swap transitions under stimulus ids with their append-only log
(``transitions``), the task and attempt lifecycle (``lifecycle``), the audit trail (``audit``),
the decision log (``decision_log``), the stored inventory, tenant shares and adopted Slurm jobs,
and helpers for bulk writes and long id lists (``bulk_insert``, ``chunks``). It imports only
``meta.model``; docs/architecture.md lists the durability rules it keeps.
"""
