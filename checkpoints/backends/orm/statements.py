"""The ORM backend's hot statements, as SQL that Postgres and SQLite both run.

A checkpoint write is three statements (move the head, add the new values, add the
checkpoint) and a head load two (the checkpoint row, then one keyed fetch of its values by key
and by (run, depth) span; a recursive walk only when a list's runs are broken), whatever the
thread's length. Parameters go through the model fields' own
preparation, so types (UUIDs, JSON, datetimes, bytes) match what the ORM would send.
"""

import json
import uuid
from collections.abc import Collection, Iterable, Sequence
from datetime import UTC, timedelta
from typing import Any

from django.db import connection, models, transaction
from django.db.models.expressions import RawSQL
from django.db.transaction import TransactionManagementError
from django.utils import timezone
from django.utils.dateparse import parse_datetime

from checkpoints.backends.base import CheckpointSummary, Claim, ThreadData
from checkpoints.backends.orm import prepared
from checkpoints.models import Checkpoint, CheckpointSource, PendingWrite, StoredValue, Thread, ThreadStatus
from checkpoints.storage.layout import Row
from checkpoints.storage.loading import StoredRows, Wanted

SUMMARY_COLUMNS = (
    "id",
    "thread_id",
    "parent_id",
    "step",
    "source",
    "next",
    "node",
    "created_by",
    "schema_version",
    "metadata",
    "digest",
    "size_bytes",
    "created_at",
)


def insert(
    model: type[models.Model], rows: Sequence[dict[str, Any]], *, ignore_conflicts: bool = False
) -> None:
    """INSERT rows (field name -> value) in one statement."""
    if not rows:
        return
    sql, params = _insert_statement(model, rows, ignore_conflicts=ignore_conflicts)
    with connection.cursor() as cursor:
        cursor.execute(sql, params)


def _insert_statement(
    model: type[models.Model], rows: Sequence[dict[str, Any]], *, ignore_conflicts: bool
) -> tuple[str, list[Any]]:
    """The INSERT of rows (field name -> value) and its parameters, prepared by the fields."""
    fields = [model._meta.get_field(name) for name in rows[0]]
    columns = ", ".join(connection.ops.quote_name(str(f.column)) for f in fields)  # type: ignore[union-attr]
    one = "(" + ", ".join(["%s"] * len(fields)) + ")"
    sql = f"INSERT INTO {model._meta.db_table} ({columns}) VALUES {', '.join([one] * len(rows))}"
    if ignore_conflicts:
        sql += " ON CONFLICT DO NOTHING"  # a row already stored stays as it is
    params = [f.get_db_prep_save(row[f.name], connection) for row in rows for f in fields]  # type: ignore[union-attr]
    return sql, params


def insert_values(thread_id: str, rows: Iterable[Row]) -> None:
    insert(
        StoredValue,
        [
            {
                "thread": thread_id,
                "key": r.key,
                "prev": r.prev,
                "data": r.data,
                "run": r.run,
                "depth": r.depth,
            }
            for r in rows
        ],
        ignore_conflicts=True,
    )


def insert_checkpoint(summary: CheckpointSummary, *, refs: dict[str, Any]) -> None:
    row = {name: getattr(summary, name) for name in SUMMARY_COLUMNS}
    row["thread"] = row.pop("thread_id")
    row["parent"] = row.pop("parent_id")
    row["digest"] = bytes.fromhex(summary.digest)
    insert(Checkpoint, [{**row, "source": str(summary.source), "refs": refs}])


def fetch_values(thread_id: str, wanted: Wanted) -> StoredRows:
    """The stored values and the list items a checkpoint needs, in one indexed query: its
    values by key, its lists' items by (run, depth) range."""
    if not wanted.keys:
        return {}
    where = [f"key IN ({', '.join(['%s'] * len(wanted.keys))})"]
    where += ["(run = %s AND depth BETWEEN %s AND %s)"] * len(wanted.spans)
    sql = f"SELECT key, prev, data FROM {VALUES} WHERE thread_id = %s AND ({' OR '.join(where)})"
    params = [thread_id, *wanted.keys, *(n for span in wanted.spans for n in span)]
    return _rows(sql, params)


def fetch_chains(thread_id: str, keys: Sequence[bytes]) -> StoredRows:
    """Every row reachable from keys through prev links, in one recursive query: the general
    read, for lists whose runs do not hold all their items (rows another writer stored first).
    UNION (not UNION ALL) reads a row shared by several lists once, and ends even on a cycle."""
    if not keys:
        return {}
    marks = ", ".join(["%s"] * len(keys))
    sql = (
        f"WITH RECURSIVE walk(key, prev, data) AS ("
        f" SELECT key, prev, data FROM {VALUES} WHERE thread_id = %s AND key IN ({marks})"
        f" UNION {_step_sql()}"
        f") SELECT key, prev, data FROM walk"
    )
    return _rows(sql, [thread_id, *keys, thread_id])


def _rows(sql: str, params: list[Any]) -> StoredRows:
    found = prepared.fetch_all(sql, params)
    return {bytes(key): (bytes(prev) if prev is not None else None, data) for key, prev, data in found}


def checkpoint_row(
    thread_id: str, checkpoint_id: uuid.UUID | None
) -> tuple[CheckpointSummary, dict[str, Any]] | None:
    """A checkpoint's header and references (the head's, when checkpoint_id is None), or None."""
    sql = f"SELECT {', '.join(SUMMARY_COLUMNS)}, refs FROM {CHECKPOINTS} WHERE thread_id = %s AND id = "
    if checkpoint_id is None:
        sql += f"(SELECT head_id FROM {THREADS} WHERE id = %s)"
        params: list[Any] = [thread_id, thread_id]
    else:
        sql += "%s"
        params = [thread_id, _checkpoint_pk(checkpoint_id)]
    row = prepared.fetch_one(sql, params)
    if row is None:
        return None
    return summary_of(_from_db(row[:-1])), json.loads(row[-1])


def _from_db(row: Sequence[Any]) -> list[Any]:
    """Raw column values as the ORM would return them, on Postgres and SQLite alike."""
    values = dict(zip(SUMMARY_COLUMNS, row, strict=True))
    for name in ("next", "metadata"):
        values[name] = json.loads(values[name])
    for name in ("id", "parent_id"):
        value = values[name]
        values[name] = value if value is None or isinstance(value, uuid.UUID) else uuid.UUID(value)
    values["created_at"] = _aware(values["created_at"])
    return list(values.values())


def _aware(value: Any) -> Any:
    """A datetime column's value as the ORM returns it: SQLite keeps text in UTC without a zone."""
    value = parse_datetime(value) if isinstance(value, str) else value
    return value.replace(tzinfo=UTC) if value is not None and value.tzinfo is None else value


THREAD_COLUMNS = ("id", "agent", "status", "head_id", "metadata", "created_at", "updated_at", "error")


def select_thread(thread_id: str, *, lock: bool, share: bool = False) -> ThreadData | None:
    """The thread as it is, or None; `lock`: FOR UPDATE (`share`: FOR KEY SHARE, which only
    another FOR UPDATE waits for), inside the caller's transaction (SQLite has no row locks: its
    IMMEDIATE transactions hold the database's write lock)."""
    if lock and connection.get_autocommit():
        raise TransactionManagementError("locking a thread needs a transaction (atomic)")
    mode = " FOR KEY SHARE" if share else " FOR UPDATE"
    suffix = mode if lock and connection.features.has_select_for_update else ""
    row = prepared.fetch_one(
        f"SELECT {', '.join(THREAD_COLUMNS)} FROM {THREADS} WHERE id = %s{suffix}", [thread_id]
    )
    return _thread_of(row) if row is not None else None


def update_thread(
    assignments: str, params: list[Any], *, where: str, where_params: list[Any], thread_id: str
) -> ThreadData | None:
    """UPDATE the thread's row if `where` holds and return it as it now is: one round trip
    where the ORM takes two (an update, then a read). SQLite has RETURNING since 3.35."""
    # All rows read: SQLite finishes the statement (and, outside a transaction, commits it)
    # only when its cursor is exhausted.
    rows = prepared.fetch_all(
        f"UPDATE {THREADS} SET {assignments} WHERE id = %s AND {where} RETURNING {', '.join(THREAD_COLUMNS)}",
        [*params, thread_id, *where_params],
    )
    return _thread_of(rows[0]) if rows else None


def insert_thread(
    *, thread_id: str, agent: str, status: ThreadStatus, metadata: dict[str, Any], head_id: str
) -> ThreadData | None:
    """Add the thread and return it as written, or None if its id is taken: ON CONFLICT
    instead of catching the unique violation, so no savepoint (two round trips) wraps it in the
    caller's transaction. The head's checkpoint row follows in the same transaction."""
    now = timezone.now()
    row = {
        "id": thread_id,
        "agent": agent,
        "status": str(status),
        "head": uuid.UUID(head_id),
        "metadata": metadata,
        "lease_owner": "",
        "lease_expires_at": None,
        "error": "",
        "created_at": now,
        "updated_at": now,
    }
    sql, params = _insert_statement(Thread, [row], ignore_conflicts=True)  # the id is its only key
    rows = prepared.fetch_all(f"{sql} RETURNING {', '.join(THREAD_COLUMNS)}", params)
    return _thread_of(rows[0]) if rows else None


def _thread_of(row: Sequence[Any]) -> ThreadData:
    """A ThreadData from a row of THREAD_COLUMNS, as the ORM would read it."""
    values = dict(zip(THREAD_COLUMNS, row, strict=True))
    head_id, metadata = values["head_id"], values["metadata"]
    return ThreadData(
        **{name: values[name] for name in ("id", "agent", "error")},
        status=ThreadStatus(values["status"]),
        head_id=str(uuid.UUID(str(head_id))) if head_id is not None else None,
        metadata=json.loads(metadata) if isinstance(metadata, str) else metadata,
        created_at=_aware(values["created_at"]),
        updated_at=_aware(values["updated_at"]),
    )


def insert_write(*, checkpoint_id: uuid.UUID, task_id: str, kind: str, data: str) -> bool:
    """Record a task's write unless the checkpoint has one for the task; True if this one was.
    ON CONFLICT instead of catching the unique violation: no savepoint around it (two round
    trips) inside the caller's transaction."""
    row = {
        "checkpoint": checkpoint_id,
        "task_id": task_id,
        "kind": kind,
        "data": data,
        "created_at": timezone.now(),
    }
    sql, params = _insert_statement(PendingWrite, [row], ignore_conflicts=True)
    return bool(prepared.fetch_all(f"{sql} RETURNING id", params))


def fetch_writes(*, thread_id: str, checkpoint_id: uuid.UUID) -> list[tuple[str, str, str]]:
    """(task_id, kind, data) of the checkpoint's writes, oldest first; none for a checkpoint
    of another thread."""
    return prepared.fetch_all(
        f"SELECT w.task_id, w.kind, w.data FROM {WRITES} w JOIN {CHECKPOINTS} c ON c.id = w.checkpoint_id "
        "WHERE w.checkpoint_id = %s AND c.thread_id = %s ORDER BY w.id",
        [_checkpoint_pk(checkpoint_id), thread_id],
    )


def _checkpoint_pk(checkpoint_id: uuid.UUID) -> Any:
    """A checkpoint id as its column stores it (SQLite: hex text)."""
    pk = Checkpoint._meta.pk
    assert pk is not None
    return pk.get_db_prep_value(checkpoint_id, connection)


def now_sql() -> str:
    """The database's clock, as SQL. Leases and updated_at are timed by it, never by a process's
    own: workers on several hosts share one database, and a host whose clock ran ahead took live
    leases (one behind kept dead ones alive). Postgres: the statement's start (Django's Now()),
    which a transaction does not freeze. SQLite: its one host's clock (milliseconds) in UTC, as
    the very text Django writes for that datetime (Django's Now() is not), since updated_at is
    compared for equality (checkpoints.orphans.take_orphan)."""
    if connection.vendor == "postgresql":
        return "statement_timestamp()"
    return (
        "(CASE WHEN STRFTIME('%%f', 'NOW') LIKE '%%.000' THEN STRFTIME('%%Y-%%m-%%d %%H:%%M:%%S', 'NOW')"
        " ELSE STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW') || '000' END)"
    )


def now() -> RawSQL:
    """now_sql() as an ORM expression."""
    return RawSQL(now_sql(), [], output_field=models.DateTimeField())


def later_sql(ttl_s: float) -> tuple[str, list[Any]]:
    """The database's clock ttl_s from now, as SQL and its parameters (SQLite: in milliseconds,
    which sort among Django's microseconds; a lease's end is never compared for equality)."""
    if connection.vendor == "postgresql":
        return "statement_timestamp() + %s", [timedelta(seconds=ttl_s)]
    return "STRFTIME('%%Y-%%m-%%d %%H:%%M:%%f', 'NOW', %s)", [f"{ttl_s:+.3f} seconds"]


def claim_lease(*, thread_id: str, owner: str, ttl_s: float) -> Claim | None:
    """Take the lease if it is free, lapsed or owner's, and say whose lapsed lease it took: on
    Postgres in one round trip (the CTE locks the row as the UPDATE would and reads the lease
    before it; RETURNING sees only the new row)."""
    until, until_params = later_sql(ttl_s)
    # <=: a lease handed off (lapsing now) is free at once, at SQLite's millisecond clock too.
    lapsed = f"lease_expires_at <= {now_sql()}"
    free = f"(lease_expires_at IS NULL OR {lapsed} OR lease_owner = %s)"
    if connection.vendor == "postgresql":
        rows = prepared.fetch_all(
            f"WITH old AS (SELECT id AS old_id, CASE WHEN {lapsed} THEN lease_owner ELSE '' END AS old_owner"
            f" FROM {THREADS}"
            f" WHERE id = %s AND {free} FOR NO KEY UPDATE)"
            f" UPDATE {THREADS} SET lease_owner = %s, lease_expires_at = {until} FROM old"
            f" WHERE id = old_id AND {free} RETURNING {', '.join(THREAD_COLUMNS)}, old_owner",
            [thread_id, owner, owner, *until_params, owner],
        )
        before = rows[0][-1] if rows else ""
        thread = _thread_of(rows[0][:-1]) if rows else None
    else:
        # SQLite's RETURNING cannot name another table; one host, one writer at a time: a read
        # and the UPDATE in one (IMMEDIATE) transaction cost no round trip.
        with transaction.atomic():
            found = prepared.fetch_one(
                f"SELECT CASE WHEN {lapsed} THEN lease_owner ELSE '' END FROM {THREADS} WHERE id = %s",
                [thread_id],
            )
            before = found[0] if found else ""
            thread = update_thread(
                f"lease_owner = %s, lease_expires_at = {until}",
                [owner, *until_params],
                where=free,
                where_params=[owner],
                thread_id=thread_id,
            )
    if thread is None:
        return None
    return Claim(thread, lapsed_owner=before)


def hand_off_lease(*, thread_id: str, owner: str, ttl_s: float) -> ThreadData | None:
    """Let owner's lease lapse in ttl_s by the database's clock; the UPDATE locks the row as
    SELECT ... FOR UPDATE would, in the same round trip."""
    until, until_params = later_sql(ttl_s)
    return update_thread(
        f"lease_expires_at = {until}",
        until_params,
        where="lease_owner = %s",
        where_params=[owner],
        thread_id=thread_id,
    )


def renew_leases(*, owners: Collection[str], ttl_s: float) -> int:
    """Extend the unexpired leases of owners by ttl_s, by the database's clock; how many.
    A lapsed lease (handed off, or taken over since) is not revived."""
    until, until_params = later_sql(ttl_s)
    marks = ", ".join(["%s"] * len(owners))
    with connection.cursor() as cursor:
        cursor.execute(
            f"UPDATE {THREADS} SET lease_expires_at = {until}"
            f" WHERE lease_owner IN ({marks}) AND lease_expires_at > {now_sql()}",
            [*until_params, *owners],
        )
        return cursor.rowcount


def release_lease(*, thread_id: str, owner: str) -> None:
    prepared.execute(
        f"UPDATE {THREADS} SET lease_owner = '', lease_expires_at = NULL WHERE id = %s AND lease_owner = %s",
        [thread_id, owner],
    )


VALUES = StoredValue._meta.db_table
WRITES = PendingWrite._meta.db_table
CHECKPOINTS = Checkpoint._meta.db_table
THREADS = Thread._meta.db_table


def _step_sql() -> str:
    """The recursive step: follow one prev link by primary key.

    On Postgres a LATERAL ... LIMIT 1 keeps it an index probe per row: planned as a join,
    a young table's statistics make a hash join over the whole thread look cheaper, which
    turns a list read quadratic. SQLite has no LATERAL and always probes the index."""
    if connection.vendor == "postgresql":
        return (
            f"SELECT v.key, v.prev, v.data FROM walk w CROSS JOIN LATERAL"
            f" (SELECT key, prev, data FROM {VALUES} WHERE thread_id = %s AND key = w.prev LIMIT 1) v"
        )
    return f"SELECT v.key, v.prev, v.data FROM walk w JOIN {VALUES} v ON v.thread_id = %s AND v.key = w.prev"


def summary_of(row: Sequence[Any]) -> CheckpointSummary:
    """A CheckpointSummary from a values_list(*SUMMARY_COLUMNS) row."""
    data = dict(zip(SUMMARY_COLUMNS, row, strict=True))
    data["id"] = str(data["id"])
    data["parent_id"] = str(data["parent_id"]) if data["parent_id"] else None
    data["source"] = CheckpointSource(data["source"])
    data["next"] = list(data["next"])
    data["digest"] = bytes(data["digest"]).hex()
    return CheckpointSummary(**data)
