"""Retention, storage accounting and key rotation for the ORM backend."""

from collections import defaultdict
from collections.abc import Collection, Iterator, Sequence
from datetime import datetime
from typing import Any, TypeVar, cast

from django.db import connection, transaction
from django.db.models import Count, F

from checkpoints.backends.base import PruneResult
from checkpoints.backends.orm import statements as sql
from checkpoints.digest import canonical_json, encode_digest, row_key, sha256
from checkpoints.keyset import batches
from checkpoints.models import Checkpoint, PendingWrite, StoredValue, StoreItem, Thread
from checkpoints.storage.crypto import Sealer, current_sealer
from checkpoints.storage.layout import INLINE, VALUE, Row
from checkpoints.storage.pruning import Node, decide, unreachable

BATCH = 500
T = TypeVar("T")


def _batches(items: Sequence[T], size: int = BATCH) -> Iterator[Sequence[T]]:
    for start in range(0, len(items), size):
        yield items[start : start + size]


class OrmRetentionMixin:
    def prune(
        self,
        *,
        thread_id: str,
        keep_last: int | None = None,
        older_than: datetime | None = None,
        protected: Collection[str] = (),
    ) -> PruneResult:
        with transaction.atomic():
            # The thread lock orders pruning against writers (they update this row first).
            head = (
                Thread.objects.select_for_update()
                .filter(pk=thread_id)
                .values_list("head_id", flat=True)
                .first()
            )
            rows = Checkpoint.objects.filter(thread_id=thread_id).values_list(
                "id", "parent_id", "created_at", "step"
            )
            nodes = [Node(str(i), str(p) if p else None, at, step) for i, p, at, step in rows]
            decision = decide(
                nodes,
                head_id=str(head) if head else None,
                keep_last=keep_last,
                older_than=older_than,
                protected=protected,
            )
            if not decision.doomed:
                return PruneResult()
            self._relink(decision.relink)
            for batch in _batches(sorted(decision.doomed)):
                Checkpoint.objects.filter(thread_id=thread_id, pk__in=batch).delete()
            freed = self.collect_garbage(thread_id=thread_id)
        return PruneResult(checkpoints=len(decision.doomed), values=freed)

    def _relink(self, relink: dict[str, str | None]) -> None:
        by_parent: dict[str | None, list[str]] = defaultdict(list)
        for child, parent in relink.items():
            by_parent[parent].append(child)
        for parent, children in by_parent.items():
            for batch in _batches(children):
                Checkpoint.objects.filter(pk__in=batch).update(parent_id=parent)

    def agents(self) -> list[str]:
        return sorted(Thread.objects.order_by().values_list("agent", flat=True).distinct())

    def prune_candidates(
        self, *, agent: str, keep_last: int | None = None, older_than: datetime | None = None
    ) -> list[str]:
        checkpoints = Checkpoint.objects.filter(thread__agent=agent).order_by()
        found: set[str] = set()
        if older_than is not None:
            old = checkpoints.filter(created_at__lt=older_than).exclude(pk=F("thread__head_id"))
            found.update(old.values_list("thread_id", flat=True).distinct())
        if keep_last is not None:
            counts = checkpoints.values("thread_id").annotate(n=Count("id")).filter(n__gt=keep_last)
            found.update(counts.values_list("thread_id", flat=True))
        return sorted(found)

    def collect_garbage(self, *, thread_id: str) -> int:
        """Delete the thread's stored values that no checkpoint refers to. Call with the thread locked."""
        prevs = {
            bytes(key): bytes(prev) if prev is not None else None
            for key, prev in StoredValue.objects.filter(thread_id=thread_id).values_list("key", "prev")
        }
        kept = Checkpoint.objects.filter(thread_id=thread_id).values_list("refs", flat=True)
        dead = sorted(unreachable(cast(Iterator[dict[str, Any]], kept.iterator()), prevs))
        for batch in _batches(dead):
            StoredValue.objects.filter(thread_id=thread_id, key__in=batch).delete()
        return len(dead)

    def delete_values(self, *, thread_id: str) -> None:
        StoredValue.objects.filter(thread_id=thread_id).delete()

    def storage_bytes(self, *, thread_id: str) -> int:
        return _storage_bytes(thread_id)

    def reseal(self, *, batch_size: int = BATCH) -> int:
        return (
            _reseal_data(StoredValue, batch_size)
            + _reseal_data(PendingWrite, batch_size)
            + _reseal_data(StoreItem, batch_size)
            + _uninline(batch_size)
        )


def storage_sql(thread: str) -> str:
    """SQL for the bytes of a thread's rows, `thread` the SQL of its id (a column of an outer
    query, or a placeholder, which it holds three times): as Postgres stores them (compressed,
    TOAST included), or where the database cannot say, an estimate from the stored columns."""
    checkpoint, value, write = (m._meta.db_table for m in (Checkpoint, StoredValue, PendingWrite))
    if connection.vendor == "postgresql":
        sizes = [f"coalesce(sum(pg_column_size({t}.*)), 0)" for t in ("c", "v", "w")]
    else:  # keys, thread ids and row headers: a fixed estimate per row
        sizes = [
            "160 * count(*) + coalesce(sum(length(c.refs)), 0)",
            "80 * count(*) + coalesce(sum(length(v.data)), 0)",
            "80 * count(*) + coalesce(sum(length(w.data)), 0)",
        ]
    return (
        f"(SELECT {sizes[0]} FROM {checkpoint} c WHERE c.thread_id = {thread})"
        f" + (SELECT {sizes[1]} FROM {value} v WHERE v.thread_id = {thread})"
        f" + (SELECT {sizes[2]} FROM {write} w JOIN {checkpoint} c ON c.id = w.checkpoint_id"
        f" WHERE c.thread_id = {thread})"
    )


def _storage_bytes(thread_id: str) -> int:
    with connection.cursor() as cursor:
        cursor.execute(f"SELECT {storage_sql('%s')}", [thread_id] * 3)
        return int(cursor.fetchone()[0])


def _reseal_data(model: type[StoredValue | PendingWrite | StoreItem], batch_size: int) -> int:
    sealer, rewritten = current_sealer(), 0
    for batch in batches(model.objects.all(), "data", batch_size=batch_size):
        for pk, data in batch:
            sealed = sealer.reseal(data)
            # Only if the row still holds what was read: a value written meanwhile (with the
            # first key already) is not overwritten with the older one.
            if sealed != data and model.objects.filter(pk=pk, data=data).update(data=sealed):
                rewritten += 1
    return rewritten


def _uninline(batch_size: int) -> int:
    """Once encrypting, move small values kept inline in checkpoint rows into sealed rows.
    Their digests do not change: an inline value and a stored one hash alike."""
    sealer = current_sealer()
    if not sealer.encrypts:
        return 0
    return sum(
        _seal_inline(pk, thread_id, cast(dict[str, Any], refs), sealer=sealer)
        for batch in batches(Checkpoint.objects.all(), "thread_id", "refs", batch_size=batch_size)
        for pk, thread_id, refs in batch
    )


def _seal_inline(pk: Any, thread_id: str, refs: dict[str, Any], *, sealer: Sealer) -> bool:
    """Move one checkpoint's inline values into sealed rows; return whether it had any."""
    plains = {name: canonical_json(ref[1]) for name, ref in refs.items() if ref[0] == INLINE}
    if not plains:
        return False
    digests = {name: sha256(plain.encode()) for name, plain in plains.items()}
    sql.insert_values(
        thread_id, [Row(row_key(digests[name]), None, sealer.seal(plain)) for name, plain in plains.items()]
    )
    refs.update({name: [VALUE, encode_digest(digest)] for name, digest in digests.items()})
    Checkpoint.objects.filter(pk=pk).update(refs=refs)
    return True
