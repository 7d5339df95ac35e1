"""A database of the benchmark's own: created fresh, migrated, dropped afterwards."""

import json
import os
import sqlite3
import tempfile
import time
from collections.abc import Iterator
from contextlib import contextmanager
from typing import Any

import psycopg
from django.core.management import call_command
from django.db import connections

RAW_TABLE = "bench_raw_insert"


@contextmanager
def bench_database(*, name: str, keep: bool) -> Iterator[str]:
    """Point the default connection at a fresh, migrated database; drop it on the way out."""
    connection = connections["default"]
    original = dict(connection.settings_dict)
    if connection.vendor == "postgresql":
        _admin(original, f'DROP DATABASE IF EXISTS "{name}"', f'CREATE DATABASE "{name}"')
    else:
        name = os.path.join(tempfile.mkdtemp(prefix="gatehouse-bench-"), "bench.sqlite3")
    connection.close()
    connection.settings_dict["NAME"] = name
    try:
        call_command("migrate", verbosity=0, interactive=False)
        yield name
    finally:
        connection.close()
        connection.settings_dict["NAME"] = original["NAME"]
        if not keep and connection.vendor == "postgresql":
            _admin(original, f'DROP DATABASE IF EXISTS "{name}"')
        elif not keep:
            os.remove(name)


def _admin(settings: dict[str, Any], *statements: str) -> None:
    with psycopg.connect(**_params(settings), autocommit=True) as conn:
        for statement in statements:
            conn.execute(statement.encode())  # the names are ours, not input


def _params(settings: dict[str, Any], *, dbname: str | None = None) -> dict[str, Any]:
    params = {
        "dbname": dbname or settings["NAME"],
        "user": settings.get("USER") or None,
        "password": settings.get("PASSWORD") or None,
        "host": settings.get("HOST") or None,
        "port": settings.get("PORT") or None,
    }
    return {k: v for k, v in params.items() if v is not None}


def raw_insert_rate(*, rows: int) -> float:
    """Single-row INSERT + COMMIT of a 2 KB JSON row, per second, straight through the driver."""
    settings = connections["default"].settings_dict
    payload = json.dumps({"payload": "x" * 2000})
    if connections["default"].vendor != "postgresql":
        return _raw_sqlite(settings["NAME"], payload, rows)
    with psycopg.connect(**_params(settings)) as conn:
        conn.execute(f"CREATE TABLE {RAW_TABLE} (id bigserial PRIMARY KEY, value jsonb NOT NULL)")
        conn.commit()
        started = time.perf_counter()
        for _ in range(rows):
            conn.execute(f"INSERT INTO {RAW_TABLE} (value) VALUES (%s::jsonb)", (payload,))
            conn.commit()
        elapsed = time.perf_counter() - started
        conn.execute(f"DROP TABLE {RAW_TABLE}")
        conn.commit()
    return rows / elapsed


def _raw_sqlite(path: str, payload: str, rows: int) -> float:
    conn = sqlite3.connect(path)
    conn.execute("PRAGMA journal_mode=WAL")
    conn.execute("PRAGMA synchronous=NORMAL")
    conn.execute(f"CREATE TABLE {RAW_TABLE} (id integer PRIMARY KEY, value text NOT NULL)")
    started = time.perf_counter()
    for _ in range(rows):
        conn.execute(f"INSERT INTO {RAW_TABLE} (value) VALUES (?)", (payload,))
        conn.commit()
    elapsed = time.perf_counter() - started
    conn.execute(f"DROP TABLE {RAW_TABLE}")
    conn.close()
    return rows / elapsed


def analyze() -> None:
    """Refresh the planner's statistics, as autovacuum would on a live database (Postgres only)."""
    if connections["default"].vendor == "postgresql":
        with connections["default"].cursor() as cursor:
            for table in ("checkpoints_thread", "checkpoints_checkpoint", "checkpoints_storedvalue"):
                cursor.execute(f"ANALYZE {table}")


def disk_bytes() -> int:
    """Bytes of the checkpoint tables on disk (heap, TOAST and indexes); Postgres only, else 0."""
    if connections["default"].vendor != "postgresql":
        return 0
    with connections["default"].cursor() as cursor:
        cursor.execute(
            "SELECT coalesce(sum(pg_total_relation_size(c.oid)), 0) FROM pg_class c "
            "WHERE c.relkind = 'r' AND c.relname LIKE 'checkpoints\\_%%'"
        )
        return int(cursor.fetchone()[0])


def wal_syncs() -> int | None:
    """The server's count of WAL flushes to disk so far (pg_stat_wal; the whole cluster, so other
    databases' commits count too); None off Postgres. Commits that share a flush (group commit)
    show as more commits than flushes."""
    if connections["default"].vendor != "postgresql":
        return None
    with connections["default"].cursor() as cursor:
        cursor.execute("SELECT pg_stat_force_next_flush()")  # this backend's counts, now
        cursor.execute("SELECT wal_sync FROM pg_stat_wal")
        return int(cursor.fetchone()[0])
