"""The GatehouseSaver's statements, as SQL that Postgres and SQLite both run."""

import json
from collections.abc import Iterable, Sequence
from typing import Any

from django.db import connections, transaction
from django.utils import timezone

from checkpoints.digest import KEY_BYTES
from checkpoints.langgraph.layout import REF, BlobRow
from checkpoints.models import LangGraphBlob, LangGraphCheckpoint, LangGraphWrite

CHECKPOINTS = LangGraphCheckpoint._meta.db_table
BLOBS = LangGraphBlob._meta.db_table
WRITES = LangGraphWrite._meta.db_table
COPIED = (
    "thread_id, checkpoint_ns, checkpoint_id, parent_id, agent, header, refs, metadata, digest, created_at"
)
WRITE_COLUMNS = "thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, task_path, data, digest"


def _prep(using: str, field: str, value: Any) -> Any:
    return LangGraphCheckpoint._meta.get_field(field).get_db_prep_save(value, connections[using])  # type: ignore[union-attr]


def insert_blobs(using: str, thread_id: str, rows: Sequence[BlobRow]) -> None:
    """Add rows; one already stored stays as it is (content-addressed: it is the same value)."""
    if not rows:
        return
    values = ", ".join(["(%s, %s, %s, %s)"] * len(rows))
    params = [p for r in rows for p in (thread_id, r.key, r.prev, r.data)]
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {BLOBS} (thread_id, key, prev, data) VALUES {values} ON CONFLICT DO NOTHING", params
        )


def put_checkpoint(using: str, thread_id: str, blobs: Sequence[BlobRow], row: dict[str, Any]) -> None:
    """Store a checkpoint and its new values atomically: one statement on Postgres (a data-modifying
    CTE, so no BEGIN/COMMIT round trips), a transaction of two elsewhere."""
    if not blobs:
        upsert_checkpoint(using, row)
        return
    if connections[using].vendor != "postgresql":
        with transaction.atomic(using=using):
            insert_blobs(using, thread_id, blobs)
            upsert_checkpoint(using, row)
        return
    values = ", ".join(["(%s, %s, %s, %s)"] * len(blobs))
    params = [p for r in blobs for p in (thread_id, r.key, r.prev, r.data)]
    upsert_checkpoint(
        using,
        row,
        prefix=f"WITH b AS (INSERT INTO {BLOBS} (thread_id, key, prev, data) VALUES {values} "
        "ON CONFLICT DO NOTHING) ",
        prefix_params=params,
    )


def upsert_checkpoint(
    using: str, row: dict[str, Any], *, prefix: str = "", prefix_params: Sequence[Any] = ()
) -> None:
    params = [
        row["thread_id"],
        row["checkpoint_ns"],
        row["checkpoint_id"],
        row["parent_id"],
        row["agent"],
        row["header"],
        _prep(using, "refs", row["refs"]),
        _prep(using, "metadata", row["metadata"]),
        row["digest"],
        _prep(using, "created_at", timezone.now()),
    ]
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"{prefix}INSERT INTO {CHECKPOINTS} (thread_id, checkpoint_ns, checkpoint_id, parent_id, agent, "
            "header, refs, metadata, digest, created_at) VALUES (%s, %s, %s, %s, %s, %s, %s, %s, %s, %s) "
            "ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id) DO UPDATE SET "
            "parent_id = excluded.parent_id, header = excluded.header, refs = excluded.refs, "
            "metadata = excluded.metadata, digest = excluded.digest",
            [*prefix_params, *params],
        )


def put_writes(
    using: str, thread_id: str, blobs: Sequence[BlobRow], rows: Sequence[tuple[Any, ...]], *, replace: bool
) -> None:
    """Store writes and the content rows they name atomically (one statement on Postgres)."""
    if not blobs:
        insert_writes(using, rows, replace=replace)
        return
    if connections[using].vendor != "postgresql":
        with transaction.atomic(using=using):
            insert_blobs(using, thread_id, blobs)
            insert_writes(using, rows, replace=replace)
        return
    values = ", ".join(["(%s, %s, %s, %s)"] * len(blobs))
    insert_writes(
        using,
        rows,
        replace=replace,
        prefix=f"WITH b AS (INSERT INTO {BLOBS} (thread_id, key, prev, data) VALUES {values} "
        "ON CONFLICT DO NOTHING) ",
        prefix_params=[p for r in blobs for p in (thread_id, r.key, r.prev, r.data)],
    )


def insert_writes(
    using: str,
    rows: Sequence[tuple[Any, ...]],
    *,
    replace: bool,
    prefix: str = "",
    prefix_params: Sequence[Any] = (),
) -> None:
    """rows: (thread, ns, checkpoint, task, idx, channel, task_path, data, digest)."""
    if not rows:
        return
    values = ", ".join(["(%s, %s, %s, %s, %s, %s, %s, %s, %s)"] * len(rows))
    conflict = (
        "DO UPDATE SET channel = excluded.channel, task_path = excluded.task_path, data = excluded.data, "
        "digest = excluded.digest"
        if replace
        else "DO NOTHING"
    )
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"{prefix}INSERT INTO {WRITES} (thread_id, checkpoint_ns, checkpoint_id, task_id, idx, channel, "
            f"task_path, data, digest) VALUES {values} "
            f"ON CONFLICT (thread_id, checkpoint_ns, checkpoint_id, task_id, idx) {conflict}",
            [*prefix_params, *(p for row in rows for p in row)],
        )


def read_blobs(
    using: str, thread_id: str, starts: Sequence[bytes], *, limit: int
) -> dict[bytes, tuple[Any, Any]]:
    """The rows at `starts` and every list item before them (following prev), in one query."""
    if not starts:
        return {}
    connection = connections[using]
    marks = ", ".join(["%s"] * len(starts))
    if connection.vendor == "postgresql":
        # A LATERAL probe per step keeps the walk on the primary key's index.
        step = (
            f"SELECT b.key, b.prev, b.data, w.n + 1 FROM walk w CROSS JOIN LATERAL (SELECT key, prev, data "
            f"FROM {BLOBS} WHERE thread_id = %s AND key = w.prev LIMIT 1) b WHERE w.n < %s"
        )
    else:
        step = (
            f"SELECT b.key, b.prev, b.data, w.n + 1 FROM walk w JOIN {BLOBS} b "
            "ON b.thread_id = %s AND b.key = w.prev WHERE w.n < %s"
        )
    # A list item's row names its content row (layout.REF + key): joined here, still one query.
    sql = (
        f"WITH RECURSIVE walk(key, prev, data, n) AS (SELECT key, prev, data, 1 FROM {BLOBS} "
        f"WHERE thread_id = %s AND key IN ({marks}) UNION ALL {step}) "
        f"SELECT w.key, w.prev, COALESCE(c.data, w.data) FROM walk w LEFT JOIN {BLOBS} c "
        f"ON length(w.data) = {1 + KEY_BYTES} AND substr(w.data, 1, 1) = %s "
        "AND c.thread_id = %s AND c.key = substr(w.data, 2)"
    )
    with connection.cursor() as cursor:
        cursor.execute(sql, [thread_id, *starts, thread_id, limit, REF, thread_id])
        return {
            bytes(key): (bytes(prev) if prev is not None else None, bytes(data)) for key, prev, data in cursor
        }


CHECKPOINT_COLUMNS = ("checkpoint_id", "parent_id", "header", "refs", "metadata", "digest")


def read_checkpoint(
    using: str, thread_id: str, ns: str, checkpoint_id: str | None
) -> tuple[LangGraphCheckpoint, list[tuple[Any, ...]]] | None:
    """The checkpoint named (or the namespace's newest) with its pending writes, in one query:
    the row joined to its writes, one result row per write."""
    connection = connections[using]
    named = " AND checkpoint_id = %s" if checkpoint_id else ""
    columns = ", ".join(CHECKPOINT_COLUMNS)
    with connection.cursor() as cursor:
        cursor.execute(
            f"SELECT c.*, w.task_id, w.idx, w.channel, w.task_path, w.data, w.digest FROM (SELECT {columns} "
            f"FROM {CHECKPOINTS} WHERE thread_id = %s AND checkpoint_ns = %s{named} "
            f"ORDER BY checkpoint_id DESC LIMIT 1) c LEFT JOIN {WRITES} w ON w.thread_id = %s "
            "AND w.checkpoint_ns = %s AND w.checkpoint_id = c.checkpoint_id",
            [thread_id, ns, *([checkpoint_id] if checkpoint_id else []), thread_id, ns],
        )
        found = cursor.fetchall()
    if not found:
        return None
    values = dict(zip(CHECKPOINT_COLUMNS, found[0][: len(CHECKPOINT_COLUMNS)], strict=True))
    for name in ("refs", "metadata"):
        # JSON columns come back as text here (Django loads Postgres' jsonb as text too).
        if isinstance(values[name], str):
            values[name] = json.loads(values[name])
    row = LangGraphCheckpoint(thread_id=thread_id, checkpoint_ns=ns, **values)
    writes = [_write(r[len(CHECKPOINT_COLUMNS) :]) for r in found if r[len(CHECKPOINT_COLUMNS)] is not None]
    return row, writes


def _write(row: Sequence[Any]) -> tuple[Any, ...]:
    """(task_id, idx, channel, task_path, data, digest), the bytes as bytes."""
    task_id, idx, channel, task_path, data, digest = row
    return task_id, idx, channel, task_path, bytes(data), bytes(digest)


def read_writes(using: str, thread_id: str, ns: str, checkpoint_id: str) -> list[tuple[Any, ...]]:
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT task_id, idx, channel, task_path, data, digest FROM {WRITES} "
            "WHERE thread_id = %s AND checkpoint_ns = %s AND checkpoint_id = %s",
            [thread_id, ns, checkpoint_id],
        )
        return [_write(row) for row in cursor]


def copy_thread(using: str, source: str, target: str) -> None:
    """Copy every row of a thread under a new thread id (digests do not cover the thread id)."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"INSERT INTO {BLOBS} (thread_id, key, prev, data) SELECT %s, key, prev, data FROM {BLOBS} "
            "WHERE thread_id = %s ON CONFLICT DO NOTHING",
            [target, source],
        )
        cursor.execute(
            f"INSERT INTO {CHECKPOINTS} ({COPIED}) SELECT %s, {COPIED.split(', ', 1)[1]} "
            f"FROM {CHECKPOINTS} WHERE thread_id = %s ON CONFLICT DO NOTHING",
            [target, source],
        )
        cursor.execute(
            f"INSERT INTO {WRITES} ({WRITE_COLUMNS}) SELECT %s, {WRITE_COLUMNS.split(', ', 1)[1]} "
            f"FROM {WRITES} WHERE thread_id = %s ON CONFLICT DO NOTHING",
            [target, source],
        )


def blob_graph(using: str, thread_id: str) -> dict[bytes, tuple[bytes | None, bytes | None]]:
    """key -> (prev, the content row a list item names) for every row of a thread."""
    with connections[using].cursor() as cursor:
        cursor.execute(
            f"SELECT key, prev, CASE WHEN length(data) = {1 + KEY_BYTES} THEN data END FROM {BLOBS} "
            "WHERE thread_id = %s",
            [thread_id],
        )
        return {
            bytes(k): (
                bytes(p) if p is not None else None,
                bytes(d)[1:] if d is not None and bytes(d).startswith(REF) else None,
            )
            for k, p, d in cursor
        }


def write_data(using: str, thread_id: str) -> list[bytes]:
    with connections[using].cursor() as cursor:
        cursor.execute(f"SELECT data FROM {WRITES} WHERE thread_id = %s", [thread_id])
        return [bytes(d) for (d,) in cursor]


def blob_links(using: str, thread_id: str) -> dict[bytes, bytes | None]:
    with connections[using].cursor() as cursor:
        cursor.execute(f"SELECT key, prev FROM {BLOBS} WHERE thread_id = %s", [thread_id])
        return {bytes(k): bytes(p) if p is not None else None for k, p in cursor}


def delete_blobs(using: str, thread_id: str, keys: Iterable[bytes]) -> int:
    keys, deleted = list(keys), 0
    for i in range(0, len(keys), 500):
        deleted += (
            LangGraphBlob.objects.using(using)
            .filter(thread_id=thread_id, key__in=keys[i : i + 500])
            .delete()[0]
        )
    return deleted
