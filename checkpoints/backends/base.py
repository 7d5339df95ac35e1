"""The checkpoint backend interface and the typed shapes it trades in.

Modelled on Django's session backends, in four parts a backend implements: thread lifecycle,
checkpoint storage, retention and the cross-thread store. Every backend passes
checkpoints/tests/contract*.py.
"""

from collections.abc import Collection
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any

from checkpoints.digest import checkpoint_digest, field_digest
from checkpoints.models import CheckpointSource, ThreadStatus


class CheckpointError(Exception):
    """Base of every error the checkpoint store raises."""


class ThreadNotFound(CheckpointError):
    def __init__(self, thread_id: str) -> None:
        super().__init__(f"Thread {thread_id!r} does not exist.")
        self.thread_id = thread_id


class ThreadExists(CheckpointError):
    def __init__(self, thread_id: str) -> None:
        super().__init__(f"Thread {thread_id!r} already exists.")
        self.thread_id = thread_id


class CheckpointNotFound(CheckpointError):
    def __init__(self, thread_id: str, checkpoint_id: str | None) -> None:
        what = f"checkpoint {checkpoint_id}" if checkpoint_id else "a head checkpoint"
        super().__init__(f"Thread {thread_id!r} has no {what}.")
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id


class HeadConflict(CheckpointError):
    """Another writer moved the thread's head first; this write was not applied."""

    def __init__(self, thread_id: str, expected: str | None, actual: str | None) -> None:
        super().__init__(
            f"Thread {thread_id!r} head moved: expected {expected}, found {actual}; nothing was written."
        )
        self.thread_id = thread_id
        self.expected = expected
        self.actual = actual


class CorruptCheckpoint(CheckpointError):
    """A checkpoint whose stored bytes fail their digest check, or fail decryption (undecryptable)."""

    def __init__(self, thread_id: str, checkpoint_id: str, *, undecryptable: bool = False) -> None:
        # Fernet cannot tell a key that does not open the data from altered ciphertext: the
        # likelier cause (a process given another key) is named first.
        why = (
            "could not be decrypted with the configured CHECKPOINT_ENCRYPTION_KEY (the key it was "
            "written with is not among them, or the stored data was altered)"
            if undecryptable
            else "failed its SHA-256 digest check"
        )
        super().__init__(f"Checkpoint {checkpoint_id} of thread {thread_id!r} {why}; refusing to load it.")
        self.thread_id = thread_id
        self.checkpoint_id = checkpoint_id


@dataclass(frozen=True)
class ThreadData:
    id: str
    agent: str
    status: ThreadStatus
    head_id: str | None
    """The current checkpoint; None only before the first checkpoint is written."""
    metadata: dict[str, Any]
    created_at: datetime
    updated_at: datetime
    error: str = ""
    """Why the thread failed, when it did."""


@dataclass(frozen=True)
class Claim:
    """A thread's lease, taken."""

    thread: ThreadData
    """The thread as the claim found it."""
    lapsed_owner: str = ""
    """The name still on the lapsed lease the claim took: its holder died mid-step, or between
    its commit and its release, so its next step may never have been sent (the reconciler's
    "lapsed" rule; a task redelivered to the worker node it died on finds its own name). "" if
    the lease was free (released) or the claimer's own live one."""


@dataclass(frozen=True)
class NewCheckpoint:
    """What a writer supplies; the backend derives step, digest, size and id."""

    values: dict[str, Any]
    """The whole state after the step, as JSON-ready data."""
    source: CheckpointSource
    next: list[str] = field(default_factory=list)
    """The node(s) to run next; empty when the thread is finished."""
    node: str = ""
    """The node that produced this checkpoint."""
    created_by: str = ""
    """Who caused it: 'worker:<host>' or 'user:<username>'."""
    schema_version: int = 1
    metadata: dict[str, Any] = field(default_factory=dict)
    created_at: datetime | None = None
    """When it was made, if not now: an import keeps the exported times."""


@dataclass(frozen=True)
class CheckpointSummary:
    """A checkpoint without its values: what a history page lists."""

    id: str
    thread_id: str
    parent_id: str | None
    """None for the first checkpoint, or when retention pruned every ancestor."""
    step: int
    source: CheckpointSource
    next: list[str]
    node: str
    created_by: str
    schema_version: int
    metadata: dict[str, Any]
    digest: str
    """SHA-256 over the header and per-field digests (checkpoints.digest)."""
    size_bytes: int
    """Bytes of the state's canonical JSON (not what storing it cost: that is shared)."""
    created_at: datetime


@dataclass(frozen=True)
class CheckpointData(CheckpointSummary):
    values: dict[str, Any]
    """The whole state. Values returned by one call are the caller's to change; list()
    shares unchanged items between the checkpoints it returns."""


@dataclass(frozen=True)
class StoreItem:
    """One entry of the cross-thread store."""

    namespace: tuple[str, ...]
    """Where it lives; through checkpoints.store.Store, without the tenant."""
    key: str
    value: Any
    created_at: datetime
    updated_at: datetime
    expires_at: datetime | None = None


@dataclass(frozen=True)
class PruneResult:
    checkpoints: int = 0
    """Checkpoints deleted."""
    values: int = 0
    """Stored values (or list items) no kept checkpoint referred to any more, deleted."""


# Aliases for annotations inside backend classes, where `list` names the list() method.
Summaries = list[CheckpointSummary]
StoreItems = list[StoreItem]
Names = list[str]


class ThreadLifecycle:
    """Threads as rows: create, read, lock, status, the single-writer lease, delete.

    Not the layout's business, but every backend keeps them: the memory backend runs the
    runtime's unit tests with leases in memory. What the apps above read of threads beyond this
    is in checkpoints.selectors, and the reconciler's repairs in checkpoints.orphans."""

    def create_thread(
        self,
        *,
        thread_id: str,
        agent: str,
        first: NewCheckpoint,
        status: ThreadStatus,
        metadata: dict[str, Any] | None = None,
    ) -> tuple[ThreadData, CheckpointData]:
        """Create a thread with its first checkpoint as head. Raise ThreadExists if taken, and
        InvalidThreadId if thread_id breaks checkpoints.ids' rule (callers check it first)."""
        raise NotImplementedError("a checkpoint backend must provide create_thread()")

    def get_thread(self, *, thread_id: str) -> ThreadData:
        raise NotImplementedError("a checkpoint backend must provide get_thread()")

    def lock_thread(self, *, thread_id: str) -> ThreadData:
        """Return the thread, locked against other writers until the transaction ends.
        Call inside transaction.atomic()."""
        raise NotImplementedError("a checkpoint backend must provide lock_thread()")

    def hold_thread(self, *, thread_id: str) -> ThreadData:
        """Return the thread, held until the transaction ends against writers that lock it
        (lock_thread: a cancel, an edit, a fork), not against the lease's heartbeat. Call inside
        transaction.atomic(): a side effect's transaction, so it and a cancel never interleave."""
        raise NotImplementedError("a checkpoint backend must provide hold_thread()")

    def set_status(
        self,
        *,
        thread_id: str,
        status: ThreadStatus,
        expected_head: str | None = None,
        error: str = "",
        only_from: Collection[ThreadStatus] | None = None,
    ) -> bool:
        """Set the thread's status; when expected_head is given, only if the head is still it;
        when only_from is, only if its status is one of them (a cancel is never overwritten)."""
        raise NotImplementedError("a checkpoint backend must provide set_status()")

    def claim(self, *, thread_id: str, owner: str, ttl_s: float) -> Claim | None:
        """Take the thread's lease if it is free, expired, or already ours; return the claim
        if taken (None if not, or if there is no such thread). A backend shared by several
        hosts times leases by its own clock, never the caller's."""
        raise NotImplementedError("a checkpoint backend must provide claim()")

    def release(self, *, thread_id: str, owner: str) -> None:
        raise NotImplementedError("a checkpoint backend must provide release()")

    def hand_off(self, *, thread_id: str, owner: str, ttl_s: float = 0) -> ThreadData | None:
        """Let owner's lease lapse in ttl_s (now, by default), keeping owner's name on it, and
        return the thread locked against other writers until the transaction ends; None if owner
        did not hold it.

        A step calls it in its commit: the next step may claim the thread at once, and until
        owner releases it (after sending that step) the reconciler can tell a worker that died
        before sending it. A step whose task runs the next step itself keeps the lease (ttl_s:
        the lease's length)."""
        raise NotImplementedError("a checkpoint backend must provide hand_off()")

    def renew(self, *, owners: Collection[str], ttl_s: float) -> int:
        """Extend the unexpired leases these owners still hold by ttl_s, in one write; return how many."""
        raise NotImplementedError("a checkpoint backend must provide renew()")

    def delete_thread(self, *, thread_id: str) -> None:
        """Delete the thread with its checkpoints, stored values and writes."""
        raise NotImplementedError("a checkpoint backend must provide delete_thread()")


class CheckpointStorage:
    """Checkpoints and their pending writes: what varies with how a backend lays values out."""

    def verify(self, checkpoint: CheckpointData) -> CheckpointData:
        """Return the checkpoint if its digest matches its values, else raise CorruptCheckpoint.

        Recomputes from the whole state (O(state)): loads check the stored bytes instead;
        this is for data that arrives from elsewhere, such as an imported thread."""
        expected = checkpoint_digest(
            thread_id=checkpoint.thread_id,
            step=checkpoint.step,
            source=checkpoint.source,
            node=checkpoint.node,
            next=checkpoint.next,
            created_by=checkpoint.created_by,
            schema_version=checkpoint.schema_version,
            metadata=checkpoint.metadata,
            fields={name: field_digest(value) for name, value in checkpoint.values.items()},
        )
        if expected != checkpoint.digest:
            raise CorruptCheckpoint(checkpoint.thread_id, checkpoint.id)
        return checkpoint

    def put(
        self,
        *,
        thread_id: str,
        parent_id: str,
        expected_head: str | None,
        checkpoint: NewCheckpoint,
        status: ThreadStatus,
    ) -> CheckpointData:
        """Write a checkpoint under parent_id and move the head to it, if the head is still
        expected_head (compare-and-swap); else raise HeadConflict and write nothing."""
        raise NotImplementedError("a checkpoint backend must provide put()")

    def get(self, *, thread_id: str, checkpoint_id: str | None = None) -> CheckpointData:
        """Load a checkpoint (the head when checkpoint_id is None), verifying its digest."""
        raise NotImplementedError("a checkpoint backend must provide get()")

    def summary(self, *, thread_id: str, checkpoint_id: str) -> CheckpointSummary:
        """A checkpoint without its values (one row, whatever the state's size): for what its
        header answers, such as which gates it opened. Unverified: the digest covers the values."""
        raise NotImplementedError("a checkpoint backend must provide summary()")

    def list(self, *, thread_id: str, limit: int | None = None) -> list[CheckpointData]:
        """Every checkpoint of the thread with its values, newest first, across all branches.
        Loads every state: pages of history want history()."""
        raise NotImplementedError("a checkpoint backend must provide list()")

    def history(self, *, thread_id: str, limit: int | None = 50, before: str | None = None) -> Summaries:
        """The newest `limit` checkpoints without values, older than `before` (a checkpoint id)
        when given: one indexed query however long the thread."""
        raise NotImplementedError("a checkpoint backend must provide history()")

    def put_write(self, *, thread_id: str, checkpoint_id: str, task_id: str, kind: str, value: Any) -> bool:
        """Record a unit of work's result; return False (keeping the first) if already recorded."""
        raise NotImplementedError("a checkpoint backend must provide put_write()")

    def get_writes(self, *, thread_id: str, checkpoint_id: str) -> dict[str, tuple[str, Any]]:
        """Every recorded write against a checkpoint: task_id -> (kind, value)."""
        raise NotImplementedError("a checkpoint backend must provide get_writes()")


class Retention:
    """Pruning, storage size and re-encryption, over the same layout."""

    def prune(
        self,
        *,
        thread_id: str,
        keep_last: int | None = None,
        older_than: datetime | None = None,
        protected: Collection[str] = (),
    ) -> PruneResult:
        """Delete the thread's checkpoints beyond the newest keep_last or created before
        older_than, except its head and `protected`; re-link kept children to their nearest
        kept ancestor; delete the stored values nothing kept refers to."""
        raise NotImplementedError("a checkpoint backend must provide prune()")

    def agents(self) -> Names:
        """The agents that have threads."""
        raise NotImplementedError("a checkpoint backend must provide agents()")

    def prune_candidates(
        self, *, agent: str, keep_last: int | None = None, older_than: datetime | None = None
    ) -> Names:
        """Threads of the agent that have checkpoints older than older_than (besides the head)
        or more than keep_last: the ones prune() may shorten."""
        raise NotImplementedError("a checkpoint backend must provide prune_candidates()")

    def storage_bytes(self, *, thread_id: str) -> int:
        """What the thread costs in storage: its checkpoints, stored values and writes."""
        raise NotImplementedError("a checkpoint backend must provide storage_bytes()")

    def reseal(self, *, batch_size: int = 500) -> int:
        """Re-encrypt every stored value, write and store item with the first configured key
        (encrypting plaintext left from before a key was set). Return the rows rewritten."""
        raise NotImplementedError("a checkpoint backend must provide reseal()")


class CrossThreadStore:
    """The cross-thread store (use checkpoints.store.Store, which adds the tenant)."""

    def store_put(
        self, *, namespace: tuple[str, ...], key: str, value: Any, ttl_s: float | None = None
    ) -> None:
        """Set the value under (namespace, key); namespace[0] is the tenant."""
        raise NotImplementedError("a checkpoint backend must provide store_put()")

    def store_get(self, *, namespace: tuple[str, ...], key: str) -> StoreItem | None:
        """The unexpired item under (namespace, key), or None."""
        raise NotImplementedError("a checkpoint backend must provide store_get()")

    def store_search(
        self,
        *,
        prefix: tuple[str, ...],
        filter: dict[str, Any] | None = None,
        limit: int = 10,
        offset: int = 0,
    ) -> StoreItems:
        """Unexpired items whose namespace starts with prefix (at least the tenant), newest
        first; `filter` keeps items whose value has those top-level key/value pairs."""
        raise NotImplementedError("a checkpoint backend must provide store_search()")

    def store_delete(self, *, namespace: tuple[str, ...], key: str) -> bool:
        raise NotImplementedError("a checkpoint backend must provide store_delete()")

    def store_purge_expired(self) -> int:
        """Delete expired store items; return how many."""
        raise NotImplementedError("a checkpoint backend must provide store_purge_expired()")


class BaseCheckpointBackend(ThreadLifecycle, CheckpointStorage, Retention, CrossThreadStore):
    """A checkpoint backend: every part above. Subclasses implement each stub
    (NotImplementedError); every backend passes checkpoints/tests/contract*.py."""
