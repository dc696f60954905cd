"""Inserting many rows that share most of their values, without per-row type processing.

SQLAlchemy runs every bound value through its column type (JSON encoding, UTC normalisation)
once per row; for a 100,000-partition job that is most of a submit's time although all tasks
share those values. Here the shared values are processed once by their column types and every
row carries only what differs, handed to the driver directly: COPY on PostgreSQL, executemany
on SQLite.
"""

from __future__ import annotations

from collections.abc import Iterator, Sequence
from typing import Any

from sqlalchemy import Table
from sqlalchemy.exc import DBAPIError
from sqlalchemy.orm import Session

CHUNK = 5_000  # rows per executemany call: bounded memory for the parameter lists


def insert_sharing(session: Session, table: Table, rows: Sequence[dict[str, Any]], shared: dict[str, Any]) -> None:
    """insert_sharing inserts ``rows`` (each holding its own columns) with ``shared`` column values."""
    if not rows:
        return
    dialect = session.get_bind().dialect
    constants = tuple(_processed(table, name, value, dialect) for name, value in shared.items())
    columns = [*rows[0], *shared]
    quote = dialect.identifier_preparer.quote
    names = ", ".join(quote(c) for c in columns)
    values = ([*row.values(), *constants] for row in rows)
    if dialect.name == "postgresql":
        _copy(session, f"COPY {quote(table.name)} ({names}) FROM STDIN", values)
        return
    statement = f"INSERT INTO {quote(table.name)} ({names}) VALUES ({', '.join(['?'] * len(columns))})"
    connection = session.connection()
    for chunk in _chunks(values):
        # the driver's own executemany: SQLAlchemy's per-row parameter handling is the cost avoided here
        connection.exec_driver_sql(statement, chunk)


def _copy(session: Session, statement: str, values: Iterator[list[Any]]) -> None:
    """_copy streams rows into PostgreSQL with COPY (one round trip, not one per row).

    The driver's own errors are raised as SQLAlchemy's, as every other statement's are: a unique
    key lost to a concurrent writer is then an IntegrityError its caller retries.
    """
    cursor = session.connection().connection.dbapi_connection.cursor()
    try:
        with cursor.copy(statement) as copy:
            for row in values:
                copy.write_row(row)
    except session.get_bind().dialect.loaded_dbapi.Error as exc:
        raise DBAPIError.instance(statement, None, exc, session.get_bind().dialect.loaded_dbapi.Error) from exc


def _chunks(values: Iterator[list[Any]]) -> Iterator[list[tuple[Any, ...]]]:
    """_chunks groups rows CHUNK at a time, so the parameter lists stay bounded."""
    chunk: list[tuple[Any, ...]] = []
    for row in values:
        chunk.append(tuple(row))
        if len(chunk) == CHUNK:
            yield chunk
            chunk = []
    if chunk:
        yield chunk


def _processed(table: Table, name: str, value: Any, dialect: Any) -> Any:
    """_processed is ``value`` as the column's type would bind it (JSON text, a UTC datetime...)."""
    processor = table.c[name].type.dialect_impl(dialect).bind_processor(dialect)
    return processor(value) if processor is not None else value
