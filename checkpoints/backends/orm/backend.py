"""`OrmBackend`: the backend interface on Django's models.

Values are stored once (docs/storage.md): a write adds only what its parent does not hold,
and a load reads the checkpoint row, then its values by key and by (run, depth) span: list
items written in order by one writer share a run, so a keyed fetch finds them all; only lists
whose runs were broken (rows another writer stored first) walk their prev links recursively.
"""

import json
import uuid
from collections.abc import Collection
from typing import Any

from django.db import connection, transaction
from django.db.models import Q
from django.utils import timezone

from checkpoints.backends.base import (
    BaseCheckpointBackend,
    CheckpointData,
    CheckpointNotFound,
    CheckpointSummary,
    Claim,
    HeadConflict,
    NewCheckpoint,
    Summaries,
    ThreadData,
    ThreadExists,
    ThreadNotFound,
)
from checkpoints.backends.orm import statements as sql
from checkpoints.backends.orm import writes
from checkpoints.backends.orm.maintenance import OrmRetentionMixin
from checkpoints.backends.orm.store import OrmStoreMixin
from checkpoints.backends.sealing import layout_of, new_summary, open_checkpoint, with_values
from checkpoints.digest import canonical_json
from checkpoints.ids import check_thread_id
from checkpoints.langgraph import pruning as langgraph
from checkpoints.models import Checkpoint, PendingWrite, Thread, ThreadStatus
from checkpoints.storage.cache import LayoutCache
from checkpoints.storage.crypto import current_sealer
from checkpoints.storage.layout import Layout, Row, plan_write
from checkpoints.storage.loading import MissingRow, row_keys, wanted

NO_ROW = uuid.UUID(int=0)


def _uuid(value: str | None) -> uuid.UUID | None:
    """Parse a checkpoint id; a malformed one matches nothing (a uuid no row has)."""
    if not value:
        return None
    try:
        return uuid.UUID(str(value))
    except ValueError:
        return NO_ROW


class OrmBackend(OrmRetentionMixin, OrmStoreMixin, BaseCheckpointBackend):
    def __init__(self) -> None:
        self.layouts = LayoutCache()

    # --- threads ------------------------------------------------------------------------

    def create_thread(
        self,
        *,
        thread_id: str,
        agent: str,
        first: NewCheckpoint,
        status: ThreadStatus,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[ThreadData, CheckpointData]:
        check_thread_id(thread_id)
        summary, layout, plan_rows, refs = self._prepare(thread_id=thread_id, parent=None, new=first)
        with transaction.atomic(savepoint=False):
            thread = sql.insert_thread(
                thread_id=thread_id, agent=agent, status=status, metadata=metadata or {}, head_id=summary.id
            )
            if thread is not None:
                sql.insert_values(thread_id, plan_rows)
                sql.insert_checkpoint(summary, refs=refs)
        if thread is None:  # raised outside the block: the caller's transaction stays usable
            raise ThreadExists(thread_id)
        self.layouts.put(alias=connection.alias, layout=layout)
        return thread, with_values(summary, first.values)

    def get_thread(self, *, thread_id: str) -> ThreadData:
        return self._select_thread(thread_id, lock=False)

    def lock_thread(self, *, thread_id: str) -> ThreadData:
        return self._select_thread(thread_id, lock=True)

    def hold_thread(self, *, thread_id: str) -> ThreadData:
        return self._select_thread(thread_id, lock=True, share=True)

    def _select_thread(self, thread_id: str, *, lock: bool, share: bool = False) -> ThreadData:
        thread = sql.select_thread(thread_id, lock=lock, share=share)
        if thread is None:
            raise ThreadNotFound(thread_id)
        return thread

    def set_status(
        self,
        *,
        thread_id: str,
        status: ThreadStatus,
        expected_head: str | None = None,
        error: str = "",
        only_from: Collection[ThreadStatus] | None = None,
    ) -> bool:
        rows = Thread.objects.filter(pk=thread_id)
        if expected_head is not None:
            rows = rows.filter(head_id=_uuid(expected_head))
        if only_from is not None:
            rows = rows.filter(status__in=list(only_from))
        # updated_at by the database's clock, as the reconciler's queued rule reads it.
        return bool(rows.update(status=status, error=error, updated_at=sql.now()))

    def claim(self, *, thread_id: str, owner: str, ttl_s: float) -> Claim | None:
        return sql.claim_lease(thread_id=thread_id, owner=owner, ttl_s=ttl_s)

    def release(self, *, thread_id: str, owner: str) -> None:
        sql.release_lease(thread_id=thread_id, owner=owner)

    def hand_off(self, *, thread_id: str, owner: str, ttl_s: float = 0) -> ThreadData | None:
        return sql.hand_off_lease(thread_id=thread_id, owner=owner, ttl_s=ttl_s)

    def renew(self, *, owners: Collection[str], ttl_s: float) -> int:
        return sql.renew_leases(owners=owners, ttl_s=ttl_s) if owners else 0

    def delete_thread(self, *, thread_id: str) -> None:
        with transaction.atomic():
            agent = (
                Thread.objects.select_for_update()
                .filter(pk=thread_id)
                .values_list("agent", flat=True)
                .first()
            )
            if agent is None:
                return
            Thread.objects.filter(pk=thread_id).update(head=None)
            self.delete_values(thread_id=thread_id)
            PendingWrite.objects.filter(checkpoint__thread_id=thread_id).delete()
            Checkpoint.objects.filter(thread_id=thread_id).update(parent=None)
            Checkpoint.objects.filter(thread_id=thread_id).delete()
            # A LangGraph agent's thread keeps LangGraph's own checkpoints under the same id.
            langgraph.delete_thread(using=connection.alias, thread_id=thread_id, agent=agent)
            Thread.objects.filter(pk=thread_id).delete()
        self.layouts.discard_thread(alias=connection.alias, thread_id=thread_id)

    # --- checkpoints --------------------------------------------------------------------

    def put(
        self,
        *,
        thread_id: str,
        parent_id: str,
        expected_head: str | None,
        checkpoint: NewCheckpoint,
        status: ThreadStatus,
    ) -> CheckpointData:
        parent = self._layout(thread_id=thread_id, checkpoint_id=parent_id)
        branch = parent.checkpoint_id != expected_head
        summary, layout, plan_rows, refs = self._prepare(
            thread_id=thread_id, parent=parent, new=checkpoint, branch=branch
        )
        moved = writes.write(summary, refs=refs, rows=plan_rows, expected_head=expected_head, status=status)
        if not moved:
            raise self._refusal(thread_id=thread_id, parent_id=parent.checkpoint_id, expected=expected_head)
        self.layouts.put(alias=connection.alias, layout=layout)
        return with_values(summary, checkpoint.values)

    def _prepare(
        self, *, thread_id: str, parent: Layout | None, new: NewCheckpoint, branch: bool = False
    ) -> tuple[CheckpointSummary, Layout, list[Row], dict[str, Any]]:
        """Plan a write under parent: its header, its layout, the rows it adds, its references."""
        plan = plan_write(new.values, parent=parent, sealer=current_sealer(), branch=branch)
        summary = new_summary(
            new,
            checkpoint_id=str(uuid.uuid4()),
            thread_id=thread_id,
            parent_id=parent.checkpoint_id if parent else None,
            step=parent.step + 1 if parent else 0,
            plan=plan,
            created_at=new.created_at or timezone.now(),
        )
        return summary, layout_of(summary, plan), plan.rows, plan.fields_json

    def _refusal(self, *, thread_id: str, parent_id: str, expected: str | None) -> Exception:
        actual = Thread.objects.filter(pk=thread_id).values_list("head_id", flat=True).first()
        if actual is None and not Thread.objects.filter(pk=thread_id).exists():
            return ThreadNotFound(thread_id)
        if not Checkpoint.objects.filter(pk=_uuid(parent_id) or NO_ROW, thread_id=thread_id).exists():
            return CheckpointNotFound(thread_id, parent_id)
        return HeadConflict(thread_id, expected, str(actual) if actual else None)

    def _layout(self, *, thread_id: str, checkpoint_id: str) -> Layout:
        """The parent's layout: cached (this process wrote or read it), else loaded."""
        layout = self.layouts.get(alias=connection.alias, checkpoint_id=checkpoint_id)
        if layout is not None and layout.thread_id == thread_id:
            return layout
        return self._load(thread_id=thread_id, checkpoint_id=checkpoint_id)[1]

    def get(self, *, thread_id: str, checkpoint_id: str | None = None) -> CheckpointData:
        return self._load(thread_id=thread_id, checkpoint_id=checkpoint_id)[0]

    def _load(self, *, thread_id: str, checkpoint_id: str | None) -> tuple[CheckpointData, Layout]:
        summary, refs = self._row(thread_id=thread_id, checkpoint_id=checkpoint_id)
        try:
            data, layout = open_checkpoint(
                summary, refs, sql.fetch_values(thread_id, wanted(refs)), all_rows=False
            )
        except MissingRow:
            # Some list item lives outside its runs (another writer stored it first): walk.
            data, layout = open_checkpoint(summary, refs, sql.fetch_chains(thread_id, row_keys(refs)))
        if self.layouts.get(alias=connection.alias, checkpoint_id=data.id) is None:
            self.layouts.put(alias=connection.alias, layout=layout)
        return data, layout

    def summary(self, *, thread_id: str, checkpoint_id: str) -> CheckpointSummary:
        return self._row(thread_id=thread_id, checkpoint_id=checkpoint_id)[0]

    def _row(self, *, thread_id: str, checkpoint_id: str | None) -> tuple[CheckpointSummary, dict[str, Any]]:
        """The checkpoint's header and references (the head's when checkpoint_id is None)."""
        found = sql.checkpoint_row(
            thread_id, None if checkpoint_id is None else _uuid(checkpoint_id) or NO_ROW
        )
        if found is None:
            self._require_thread(thread_id)
            raise CheckpointNotFound(thread_id, checkpoint_id)
        return found

    def _require_thread(self, thread_id: str) -> None:
        if not Thread.objects.filter(pk=thread_id).exists():
            raise ThreadNotFound(thread_id)

    def list(self, *, thread_id: str, limit: int | None = None) -> list[CheckpointData]:
        return [
            self.get(thread_id=thread_id, checkpoint_id=summary.id)
            for summary in self.history(thread_id=thread_id, limit=limit)
        ]

    def history(self, *, thread_id: str, limit: int | None = 50, before: str | None = None) -> Summaries:
        rows = Checkpoint.objects.filter(thread_id=thread_id).order_by("-created_at", "-step")
        if before is not None:
            cursor = Checkpoint.objects.filter(pk=_uuid(before) or NO_ROW, thread_id=thread_id)
            mark = cursor.values_list("created_at", "step").first()
            if mark is None:
                raise CheckpointNotFound(thread_id, before)
            rows = rows.filter(Q(created_at__lt=mark[0]) | Q(created_at=mark[0], step__lt=mark[1]))
        found = rows.values_list(*sql.SUMMARY_COLUMNS)
        return [sql.summary_of(row) for row in (found[:limit] if limit is not None else found)]

    # --- pending writes -----------------------------------------------------------------

    def put_write(self, *, thread_id: str, checkpoint_id: str, task_id: str, kind: str, value: Any) -> bool:
        data = current_sealer().seal(canonical_json(value))  # refuses what is not JSON, before any query
        return sql.insert_write(
            checkpoint_id=_uuid(checkpoint_id) or NO_ROW, task_id=task_id, kind=kind, data=data
        )

    def get_writes(self, *, thread_id: str, checkpoint_id: str) -> dict[str, tuple[str, Any]]:
        sealer = current_sealer()
        return {
            task_id: (kind, json.loads(sealer.open(data)))
            for task_id, kind, data in sql.fetch_writes(
                thread_id=thread_id, checkpoint_id=_uuid(checkpoint_id) or NO_ROW
            )
        }
