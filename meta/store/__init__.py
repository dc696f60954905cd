"""meta.store: durable state in PostgreSQL (production) or a SQLite file (embedded default)."""
