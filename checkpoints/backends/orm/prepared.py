"""Run hot statements; on Postgres as server-side prepared statements.

Django binds parameters client-side, so Postgres parses and plans every statement anew; the
few hot statements (the store's, the lease's, an API token's) are the same text every time,
so preparing them once per connection saves that, and running them as plain SQL saves the
ORM's compilation of each (0.3-1 ms of CPU a query). Django turns psycopg's preparing off
(prepare_threshold=None, with which psycopg ignores prepare=True); settings turn it back on
(DB_PREPARED_STATEMENTS). Errors are Django's
(wrap_database_errors) and the statement shows in connection.queries like any other.
"""

import time
from collections.abc import Sequence
from typing import Any, TypeVar

import psycopg
from django.db import connection, models

M = TypeVar("M", bound=models.Model)


def columns(model: type[models.Model], alias: str) -> str:
    """The SELECT list of a model's concrete columns, in the order instance() reads them."""
    quote = connection.ops.quote_name
    return ", ".join(f"{alias}.{quote(field.column)}" for field in model._meta.concrete_fields)


def instance(model: type[M], row: Sequence[Any]) -> M:
    """A model instance from a row of columns(model), converted as the ORM converts its own
    query's values (SQLite's text datetimes and integer booleans, JSON text)."""
    fields = model._meta.concrete_fields
    values = []
    for field, value in zip(fields, row, strict=True):
        column = field.get_col(model._meta.db_table)
        own = field.get_db_converters(connection)  # type: ignore[attr-defined]  # (not in django-stubs)
        for convert in [*connection.ops.get_db_converters(column), *own]:
            value = convert(value, column, connection)
        values.append(value)
    return model.from_db(connection.alias, [f.attname for f in fields], values)


def fetch_one(sql: str, params: Sequence[Any]) -> Any:
    rows = _run(sql, params, all_rows=False)
    return rows[0] if rows else None


def fetch_all(sql: str, params: Sequence[Any]) -> list[Any]:
    return _run(sql, params, all_rows=True)


def execute(sql: str, params: Sequence[Any]) -> None:
    """Run a statement that returns no rows."""
    _run(sql, params, all_rows=None)


def _run(sql: str, params: Sequence[Any], *, all_rows: bool | None) -> list[Any]:
    if connection.vendor != "postgresql":
        with connection.cursor() as cursor:
            cursor.execute(sql, params)
            if all_rows is None:
                return []
            return list(cursor.fetchall() if all_rows else filter(None, [cursor.fetchone()]))
    connection.ensure_connection()
    started = time.monotonic()
    with connection.wrap_database_errors, psycopg.Cursor(connection.connection) as cursor:
        cursor.execute(sql, params, prepare=True)
        rows = [] if all_rows is None else cursor.fetchall() if all_rows else [cursor.fetchone()]
    if connection.queries_logged:
        connection.queries_log.append({"sql": sql, "time": f"{time.monotonic() - started:.3f}"})
    return [row for row in rows if row is not None]
