"""`rotate_checkpoint_key` for GatehouseSaver's tables: every stored value, list item, write and
header sealed with the first key, and the short values held in refs moved into sealed rows."""

from typing import Any, cast

from django.db import DEFAULT_DB_ALIAS, models

from checkpoints.keyset import batches
from checkpoints.langgraph import layout, sql
from checkpoints.models import LangGraphBlob, LangGraphCheckpoint, LangGraphWrite
from checkpoints.storage.crypto import Sealer, current_sealer


def reseal(*, using: str = DEFAULT_DB_ALIAS, batch_size: int = 500) -> int:
    """Re-encrypt the LangGraph tables with the first key; return the rows rewritten."""
    sealer = current_sealer()
    return (
        _reseal_column(LangGraphBlob, "data", sealer=sealer, using=using, batch_size=batch_size)
        + _reseal_column(LangGraphWrite, "data", sealer=sealer, using=using, batch_size=batch_size)
        + _reseal_column(LangGraphCheckpoint, "header", sealer=sealer, using=using, batch_size=batch_size)
        + _seal_inline(sealer=sealer, using=using, batch_size=batch_size)
    )


def _resealed(sealer: Sealer, stored: bytes) -> bytes:
    """Stored bytes sealed with the first key (plain, compressed or sealed before); a row that
    names content rows holds nothing to seal."""
    if stored.startswith(layout.REF):
        return stored
    return sealer.seal_bytes(layout.unpack(sealer, stored))


def _reseal_column(
    model: type[models.Model], column: str, *, sealer: Sealer, using: str, batch_size: int
) -> int:
    rows = model._default_manager.using(using)
    rewritten = 0
    for batch in batches(rows, column, batch_size=batch_size):
        for pk, stored in batch:
            sealed = _resealed(sealer, stored := bytes(stored))
            # Only if the row still holds what was read: a header or write replaced meanwhile (with
            # the first key already) is not overwritten with the older one.
            if sealed != stored and rows.filter(pk=pk, **{column: stored}).update(**{column: sealed}):
                rewritten += 1
    return rewritten


def _seal_inline(*, sealer: Sealer, using: str, batch_size: int) -> int:
    """Move values held in refs into sealed rows. The checkpoints' digests stay: they cover an
    inline value as the digest of its bytes (layout.digest_refs), as they do a stored one."""
    if not sealer.encrypts:
        return 0
    rows = LangGraphCheckpoint.objects.using(using)
    return sum(
        _move_inline(pk, cast(dict[str, Any], refs), sealer=sealer, using=using)
        for batch in batches(rows, "refs", batch_size=batch_size)
        for pk, refs in batch
    )


def _move_inline(pk: tuple[str, str, str], refs: dict[str, Any], *, sealer: Sealer, using: str) -> int:
    inline = [name for name, ref in refs.items() if ref[0] == layout.INLINE]
    if not inline:
        return 0
    blobs = []
    for name in inline:
        refs[name], row = layout.stored_value(sealer, layout.inline_bytes(refs[name]))
        if row is not None:  # always, with a key
            blobs.append(row)
    sql.insert_blobs(using, pk[0], blobs)
    LangGraphCheckpoint.objects.using(using).filter(pk=pk).update(refs=refs)
    return 1
