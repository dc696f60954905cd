"""meta.service: the API that the CLI calls (submit, status, list, cancel, retry) and its read models."""
