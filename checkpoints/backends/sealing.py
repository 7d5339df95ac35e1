"""What every backend shares: sealing a planned write into a checkpoint, and opening one."""

from datetime import datetime
from typing import Any

from checkpoints.backends.base import CheckpointData, CheckpointSummary, CorruptCheckpoint, NewCheckpoint
from checkpoints.digest import checkpoint_digest
from checkpoints.storage.crypto import current_sealer, failed_decryption
from checkpoints.storage.layout import Layout, Plan
from checkpoints.storage.loading import MissingRow, StoredRows, Tampered, load_values


def digest_of(
    summary: CheckpointSummary | NewCheckpoint, *, thread_id: str, step: int, fields: dict[str, Any]
) -> str:
    """The checkpoint digest of a header and its per-field digests."""
    return checkpoint_digest(
        thread_id=thread_id,
        step=step,
        source=summary.source,
        node=summary.node,
        next=list(summary.next),
        created_by=summary.created_by,
        schema_version=summary.schema_version,
        metadata=summary.metadata,
        fields=fields,
    )


def new_summary(
    new: NewCheckpoint,
    *,
    checkpoint_id: str,
    thread_id: str,
    parent_id: str | None,
    step: int,
    plan: Plan,
    created_at: datetime,
) -> CheckpointSummary:
    """The header of a checkpoint about to be written, with its digest and size."""
    return CheckpointSummary(
        id=checkpoint_id,
        thread_id=thread_id,
        parent_id=parent_id,
        step=step,
        source=new.source,
        next=list(new.next),
        node=new.node,
        created_by=new.created_by,
        schema_version=new.schema_version,
        metadata=dict(new.metadata),
        digest=digest_of(new, thread_id=thread_id, step=step, fields=plan.digest_fields),
        size_bytes=plan.size_bytes,
        created_at=created_at,
    )


_SUMMARY_FIELDS = tuple(CheckpointSummary.__dataclass_fields__)


def with_values(summary: CheckpointSummary, values: dict[str, Any]) -> CheckpointData:
    # Shallow on purpose (dataclasses.asdict would deep-copy every field).
    return CheckpointData(**{name: getattr(summary, name) for name in _SUMMARY_FIELDS}, values=values)


def open_checkpoint(
    summary: CheckpointSummary, refs: dict[str, Any], rows: StoredRows, *, all_rows: bool = True
) -> tuple[CheckpointData, Layout]:
    """Decode a stored checkpoint, checking every byte against the digest; raise CorruptCheckpoint.

    all_rows=False: `rows` may lack rows that are stored elsewhere, so a missing one raises
    MissingRow, for the reader to look wider before calling it corrupt."""
    try:
        values, field_refs, lists = load_values(refs, rows, sealer=current_sealer())
    except MissingRow as exc:
        if not all_rows:
            raise
        raise CorruptCheckpoint(summary.thread_id, summary.id) from exc
    except Tampered as exc:
        raise CorruptCheckpoint(summary.thread_id, summary.id, undecryptable=failed_decryption(exc)) from exc
    fields = {name: ref.digest_json() for name, ref in field_refs.items()}
    if digest_of(summary, thread_id=summary.thread_id, step=summary.step, fields=fields) != summary.digest:
        raise CorruptCheckpoint(summary.thread_id, summary.id)
    layout = Layout(
        checkpoint_id=summary.id, thread_id=summary.thread_id, step=summary.step, refs=field_refs, lists=lists
    )
    return with_values(summary, values), layout


def layout_of(summary: CheckpointSummary, plan: Plan) -> Layout:
    """The layout a child of this just-planned checkpoint will be written against."""
    return Layout(
        checkpoint_id=summary.id,
        thread_id=summary.thread_id,
        step=summary.step,
        refs=plan.refs,
        lists=plan.lists,
    )
