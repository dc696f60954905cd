"""Column types that behave the same on PostgreSQL and SQLite."""

from __future__ import annotations

import json
from datetime import UTC, datetime
from typing import Any

from sqlalchemy import DateTime, Text
from sqlalchemy.engine import Dialect
from sqlalchemy.types import TypeDecorator


class UTCDateTime(TypeDecorator[datetime]):
    """UTCDateTime stores aware UTC datetimes; SQLite's naive values come back as UTC."""

    impl = DateTime(timezone=True)
    cache_ok = True

    def process_bind_param(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """process_bind_param normalises to UTC (naive inputs are taken as UTC)."""
        if value is None:
            return None
        value = value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)
        return value.replace(tzinfo=None) if dialect.name == "sqlite" else value

    def process_result_value(self, value: datetime | None, dialect: Dialect) -> datetime | None:
        """process_result_value returns aware UTC datetimes on every backend."""
        if value is None:
            return None
        return value.replace(tzinfo=UTC) if value.tzinfo is None else value.astimezone(UTC)


class JSONText(TypeDecorator[Any]):
    """JSONText stores JSON as text with sorted keys, so equal values compare equal."""

    impl = Text
    cache_ok = True

    def process_bind_param(self, value: Any, dialect: Dialect) -> str | None:
        """process_bind_param serialises to canonical JSON."""
        return None if value is None else json.dumps(value, sort_keys=True, separators=(",", ":"))

    def process_result_value(self, value: str | None, dialect: Dialect) -> Any:
        """process_result_value parses the stored JSON."""
        return None if value is None else json.loads(value)
