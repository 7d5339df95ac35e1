"""An in-memory backend for tests and experiments. One process, no durability.

It lays values out exactly as the ORM backend does (checkpoints.storage), in dicts instead
of tables, so the contract suite checks the same sharing, digests and encryption.
"""

import json
import threading
import time
import uuid
from collections.abc import Collection
from dataclasses import dataclass, replace
from datetime import datetime
from typing import Any

from django.utils import timezone

from checkpoints.backends.base import (
    BaseCheckpointBackend,
    CheckpointData,
    CheckpointNotFound,
    CheckpointSummary,
    Claim,
    HeadConflict,
    Names,
    NewCheckpoint,
    PruneResult,
    Summaries,
    ThreadData,
    ThreadExists,
    ThreadNotFound,
)
from checkpoints.backends.memory_store import MemoryStoreMixin
from checkpoints.backends.sealing import layout_of, new_summary, open_checkpoint, with_values
from checkpoints.digest import canonical_json
from checkpoints.ids import check_thread_id
from checkpoints.models import ThreadStatus
from checkpoints.storage.crypto import current_sealer
from checkpoints.storage.layout import Layout, plan_write
from checkpoints.storage.pruning import Node, decide, unreachable


@dataclass
class Stored:
    """A checkpoint as kept: its header, its references, and the layout to write its children."""

    summary: CheckpointSummary
    refs: dict[str, Any]
    layout: Layout


class MemoryBackend(MemoryStoreMixin, BaseCheckpointBackend):
    def __init__(self) -> None:
        super().__init__()
        self._lock = threading.RLock()
        self._threads: dict[str, ThreadData] = {}
        self._checkpoints: dict[str, dict[str, Stored]] = {}
        self._values: dict[str, dict[bytes, tuple[bytes | None, str]]] = {}
        self._leases: dict[str, tuple[str, float]] = {}
        self._writes: dict[tuple[str, str], dict[str, tuple[str, str]]] = {}

    def _write(
        self, *, thread_id: str, parent: Stored | None, new: NewCheckpoint, branch: bool = False
    ) -> Stored:
        layout = parent.layout if parent else None
        plan = plan_write(new.values, parent=layout, sealer=current_sealer(), branch=branch)
        summary = new_summary(
            new,
            checkpoint_id=str(uuid.uuid4()),
            thread_id=thread_id,
            parent_id=parent.summary.id if parent else None,
            step=parent.summary.step + 1 if parent else 0,
            plan=plan,
            created_at=new.created_at or timezone.now(),
        )
        values = self._values.setdefault(thread_id, {})
        for row in plan.rows:
            values.setdefault(row.key, (row.prev, row.data))  # written once (runs only matter to SQL)
        stored = Stored(summary=summary, refs=plan.fields_json, layout=layout_of(summary, plan))
        self._checkpoints.setdefault(thread_id, {})[summary.id] = stored
        return stored

    def _thread(self, thread_id: str) -> ThreadData:
        try:
            return self._threads[thread_id]
        except KeyError as exc:
            raise ThreadNotFound(thread_id) from exc

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
        with self._lock:
            if thread_id in self._threads:
                raise ThreadExists(thread_id)
            stored = self._write(thread_id=thread_id, parent=None, new=first)
            now = timezone.now()
            thread = ThreadData(
                id=thread_id,
                agent=agent,
                status=status,
                head_id=stored.summary.id,
                metadata=dict(metadata or {}),
                created_at=now,
                updated_at=now,
            )
            self._threads[thread_id] = thread
            return thread, with_values(stored.summary, first.values)

    def get_thread(self, *, thread_id: str) -> ThreadData:
        with self._lock:
            return self._thread(thread_id)

    def lock_thread(self, *, thread_id: str) -> ThreadData:
        # One process: the writers that matter hold self._lock around each call.
        return self.get_thread(thread_id=thread_id)

    hold_thread = lock_thread

    def put(
        self,
        *,
        thread_id: str,
        parent_id: str,
        expected_head: str | None,
        checkpoint: NewCheckpoint,
        status: ThreadStatus,
    ) -> CheckpointData:
        with self._lock:
            thread = self._thread(thread_id)
            parent = self._checkpoints[thread_id].get(parent_id)
            if parent is None:
                raise CheckpointNotFound(thread_id, parent_id)
            if thread.head_id != expected_head:
                raise HeadConflict(thread_id, expected_head, thread.head_id)
            stored = self._write(
                thread_id=thread_id, parent=parent, new=checkpoint, branch=parent_id != expected_head
            )
            self._threads[thread_id] = replace(
                thread, head_id=stored.summary.id, status=status, error="", updated_at=timezone.now()
            )
            return with_values(stored.summary, checkpoint.values)

    def get(self, *, thread_id: str, checkpoint_id: str | None = None) -> CheckpointData:
        with self._lock:
            stored = self._stored(thread_id, checkpoint_id)
            values = self._values.get(thread_id, {})
            return open_checkpoint(stored.summary, stored.refs, values)[0]

    def summary(self, *, thread_id: str, checkpoint_id: str) -> CheckpointSummary:
        with self._lock:
            return self._stored(thread_id, checkpoint_id).summary

    def _stored(self, thread_id: str, checkpoint_id: str | None) -> Stored:
        """The checkpoint (the head when checkpoint_id is None); call holding self._lock."""
        thread = self._thread(thread_id)
        stored = self._checkpoints[thread_id].get(checkpoint_id or thread.head_id or "")
        if stored is None:
            raise CheckpointNotFound(thread_id, checkpoint_id)
        return stored

    def list(self, *, thread_id: str, limit: int | None = None) -> list[CheckpointData]:
        return [
            self.get(thread_id=thread_id, checkpoint_id=s.id)
            for s in self.history(thread_id=thread_id, limit=limit)
        ]

    def history(self, *, thread_id: str, limit: int | None = 50, before: str | None = None) -> Summaries:
        with self._lock:
            newest = sorted(
                (s.summary for s in self._checkpoints.get(thread_id, {}).values()),
                key=lambda c: (c.created_at, c.step),
                reverse=True,
            )
        if before is not None:
            marks = [i for i, c in enumerate(newest) if c.id == before]
            if not marks:
                raise CheckpointNotFound(thread_id, before)
            newest = newest[marks[0] + 1 :]
        return newest[:limit] if limit is not None else newest

    def set_status(
        self,
        *,
        thread_id: str,
        status: ThreadStatus,
        expected_head: str | None = None,
        error: str = "",
        only_from: Collection[ThreadStatus] | None = None,
    ) -> bool:
        with self._lock:
            thread = self._threads.get(thread_id)
            if thread is None or (expected_head is not None and thread.head_id != expected_head):
                return False
            if only_from is not None and thread.status not in only_from:
                return False
            self._threads[thread_id] = replace(thread, status=status, error=error, updated_at=timezone.now())
            return True

    def claim(self, *, thread_id: str, owner: str, ttl_s: float) -> Claim | None:
        with self._lock:
            if thread_id not in self._threads:
                return None
            holder, expires = self._leases.get(thread_id, ("", 0.0))
            if holder and holder != owner and expires > time.monotonic():
                return None
            self._leases[thread_id] = (owner, time.monotonic() + ttl_s)
            lapsed = holder if expires <= time.monotonic() else ""
            return Claim(self._threads[thread_id], lapsed_owner=lapsed)

    def release(self, *, thread_id: str, owner: str) -> None:
        with self._lock:
            if self._leases.get(thread_id, ("", 0.0))[0] == owner:
                del self._leases[thread_id]

    def hand_off(self, *, thread_id: str, owner: str, ttl_s: float = 0) -> ThreadData | None:
        with self._lock:
            if thread_id not in self._threads or self._leases.get(thread_id, ("", 0.0))[0] != owner:
                return None
            self._leases[thread_id] = (owner, time.monotonic() + ttl_s)
            return self._threads[thread_id]

    def renew(self, *, owners: Collection[str], ttl_s: float) -> int:
        with self._lock:
            now = time.monotonic()
            held = {t: o for t, (o, expires) in self._leases.items() if o in set(owners) and expires > now}
            for thread_id, owner in held.items():
                self._leases[thread_id] = (owner, time.monotonic() + ttl_s)
            return len(held)

    def put_write(self, *, thread_id: str, checkpoint_id: str, task_id: str, kind: str, value: Any) -> bool:
        data = current_sealer().seal(canonical_json(value))
        with self._lock:
            writes = self._writes.setdefault((thread_id, checkpoint_id), {})
            if task_id in writes:
                return False
            writes[task_id] = (kind, data)
            return True

    def get_writes(self, *, thread_id: str, checkpoint_id: str) -> dict[str, tuple[str, Any]]:
        sealer = current_sealer()
        with self._lock:
            writes = dict(self._writes.get((thread_id, checkpoint_id), {}))
        return {task: (kind, json.loads(sealer.open(data))) for task, (kind, data) in writes.items()}

    def delete_thread(self, *, thread_id: str) -> None:
        with self._lock:
            self._threads.pop(thread_id, None)
            self._checkpoints.pop(thread_id, None)
            self._values.pop(thread_id, None)
            self._leases.pop(thread_id, None)
            for key in [k for k in self._writes if k[0] == thread_id]:
                del self._writes[key]

    # --- retention and storage ----------------------------------------------------------

    def prune(
        self,
        *,
        thread_id: str,
        keep_last: int | None = None,
        older_than: datetime | None = None,
        protected: Collection[str] = (),
    ) -> PruneResult:
        with self._lock:
            thread = self._threads.get(thread_id)
            stored = self._checkpoints.get(thread_id, {})
            nodes = [
                Node(i, s.summary.parent_id, s.summary.created_at, s.summary.step) for i, s in stored.items()
            ]
            decision = decide(
                nodes,
                head_id=thread.head_id if thread else None,
                keep_last=keep_last,
                older_than=older_than,
                protected=protected,
            )
            for child, parent in decision.relink.items():
                stored[child].summary = replace(stored[child].summary, parent_id=parent)
            for doomed in decision.doomed:
                del stored[doomed]
                self._writes.pop((thread_id, doomed), None)
            values = self._values.get(thread_id, {})
            dead = unreachable(
                (s.refs for s in stored.values()), {k: prev for k, (prev, _) in values.items()}
            )
            for key in dead:
                del values[key]
            return PruneResult(checkpoints=len(decision.doomed), values=len(dead))

    def agents(self) -> Names:
        with self._lock:
            return sorted({t.agent for t in self._threads.values()})

    def prune_candidates(
        self, *, agent: str, keep_last: int | None = None, older_than: datetime | None = None
    ) -> Names:
        with self._lock:
            found = []
            for thread in self._threads.values():
                stored = self._checkpoints.get(thread.id, {})
                old = [i for i, s in stored.items() if older_than and s.summary.created_at < older_than]
                too_many = keep_last is not None and len(stored) > keep_last
                if thread.agent == agent and (too_many or set(old) - {thread.head_id}):
                    found.append(thread.id)
            return sorted(found)

    def storage_bytes(self, *, thread_id: str) -> int:
        with self._lock:
            values = self._values.get(thread_id, {})
            rows = sum(len(key) + len(prev or b"") + len(data) for key, (prev, data) in values.items())
            headers = sum(
                len(canonical_json(s.refs)) + 160 for s in self._checkpoints.get(thread_id, {}).values()
            )
            writes = sum(
                len(d) for (t, _), w in self._writes.items() if t == thread_id for _, d in w.values()
            )
            return rows + headers + writes

    def reseal(self, *, batch_size: int = 500) -> int:
        sealer, rewritten = current_sealer(), 0
        with self._lock:
            for values in self._values.values():
                for key, (prev, data) in values.items():
                    values[key] = (prev, sealer.reseal(data))
                    rewritten += values[key][1] != data
            for writes in self._writes.values():
                for task, (kind, data) in writes.items():
                    writes[task] = (kind, sealer.reseal(data))
                    rewritten += writes[task][1] != data
        return rewritten + self.reseal_store(sealer)
