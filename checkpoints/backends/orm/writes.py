"""Writing a checkpoint and moving the head in as few round trips as the database allows.

Postgres: one statement. Data-modifying CTEs move the head (compare-and-swap), add the new
values and add the checkpoint, each insert only if the head moved; in autocommit that
statement is also its own transaction, so a checkpoint costs one round trip and one commit.
Elsewhere (SQLite): the same three statements in one transaction.

Either way the head moves first: its row lock orders the write against other writers and
against retention (which locks the thread before pruning), and a refused write inserts
nothing, so the caller's transaction stays clean without a savepoint.
"""

import uuid
from collections.abc import Sequence
from typing import Any

from django.db import connection, transaction

from checkpoints.backends.base import CheckpointSummary
from checkpoints.backends.orm import prepared
from checkpoints.backends.orm import statements as sql
from checkpoints.digest import canonical_json
from checkpoints.models import Checkpoint, Thread, ThreadStatus
from checkpoints.storage.layout import Row

THREADS = Thread._meta.db_table
CHECKPOINTS = Checkpoint._meta.db_table


def write(
    summary: CheckpointSummary,
    *,
    refs: dict[str, Any],
    rows: Sequence[Row],
    expected_head: str | None,
    status: ThreadStatus,
) -> bool:
    """Add the checkpoint and its new values and make it the head, if the head is still
    expected_head and the parent still exists; return whether it did (else nothing changed)."""
    if connection.vendor == "postgresql":
        return _write_postgres(summary, refs=refs, rows=rows, expected=expected_head, status=status)
    with transaction.atomic(savepoint=False):
        moved = _move_head(summary, expected=expected_head, status=status)
        if moved:
            sql.insert_values(summary.thread_id, rows)
            sql.insert_checkpoint(summary, refs=refs)
    return moved


def _move_head(summary: CheckpointSummary, *, expected: str | None, status: ThreadStatus) -> bool:
    pk = Checkpoint._meta.pk
    assert pk is not None and summary.parent_id is not None
    uuid_param = lambda value: pk.get_db_prep_value(uuid.UUID(value), connection)  # noqa: E731
    head = "= %s" if expected else "IS NULL"
    statement = (
        f"UPDATE {THREADS} SET head_id = %s, status = %s, error = '', updated_at = {sql.now_sql()}"
        f" WHERE id = %s AND head_id {head}"
        f" AND EXISTS (SELECT 1 FROM {CHECKPOINTS} WHERE id = %s AND thread_id = %s)"
    )
    params = [uuid_param(summary.id), str(status), summary.thread_id]
    params += [uuid_param(expected)] if expected else []
    params += [uuid_param(summary.parent_id), summary.thread_id]
    with connection.cursor() as cursor:
        cursor.execute(statement, params)
        return cursor.rowcount == 1


def _write_postgres(
    summary: CheckpointSummary,
    *,
    refs: dict[str, Any],
    rows: Sequence[Row],
    expected: str | None,
    status: ThreadStatus,
) -> bool:
    parts = [_moved(summary, expected=expected, status=status)]
    parts += [_stored(summary.thread_id, rows)] if rows else []
    parts.append(_written(summary, refs=refs))
    statement = f"WITH {', '.join(text for text, _ in parts)} SELECT count(*) FROM moved"
    return bool(prepared.fetch_one(statement, [p for _, params in parts for p in params])[0])


Part = tuple[str, list[Any]]
"""One CTE of the write statement and its parameters."""


def _moved(summary: CheckpointSummary, *, expected: str | None, status: ThreadStatus) -> Part:
    """Move the head, if it is still `expected` and the parent is still the thread's; updated_at
    by the database's clock, as the reconciler reads it (checkpoints.orphans)."""
    head = "= %s::uuid" if expected else "IS NULL"
    statement = (
        f"moved AS (UPDATE {THREADS} SET head_id = %s::uuid, status = %s, error = '',"
        f" updated_at = {sql.now_sql()} WHERE id = %s AND head_id {head}"
        f" AND EXISTS (SELECT 1 FROM {CHECKPOINTS} WHERE id = %s::uuid AND thread_id = %s) RETURNING id)"
    )
    params = [summary.id, str(status), summary.thread_id, *([expected] if expected else [])]
    return statement, [*params, summary.parent_id, summary.thread_id]


def _stored(thread_id: str, rows: Sequence[Row]) -> Part:
    """Add the new values, if the head moved; a value already stored stays as it is."""
    one = "(%s, %s::bytea, %s::bytea, %s, %s::integer, %s::integer)"
    statement = (
        f"stored AS (INSERT INTO {sql.VALUES} (thread_id, key, prev, data, run, depth)"
        f" SELECT * FROM (VALUES {', '.join([one] * len(rows))}) AS v"
        f" WHERE EXISTS (SELECT 1 FROM moved) ON CONFLICT DO NOTHING)"
    )
    return statement, [p for r in rows for p in (thread_id, r.key, r.prev, r.data, r.run, r.depth)]


def _written(summary: CheckpointSummary, *, refs: dict[str, Any]) -> Part:
    """Add the checkpoint, if the head moved."""
    statement = (
        f"written AS (INSERT INTO {CHECKPOINTS} ({', '.join(sql.SUMMARY_COLUMNS)}, refs)"
        f" SELECT %s::uuid, %s, %s::uuid, %s, %s, %s, %s, %s, %s, %s, %s::bytea, %s, %s, %s"
        f" WHERE EXISTS (SELECT 1 FROM moved))"
    )
    return statement, [
        summary.id, summary.thread_id, summary.parent_id, summary.step, str(summary.source),
        canonical_json(summary.next), summary.node, summary.created_by, summary.schema_version,
        canonical_json(summary.metadata), bytes.fromhex(summary.digest), summary.size_bytes,
        summary.created_at, canonical_json(refs),
    ]  # fmt: skip
