"""Threads, their immutable checkpoints, the values those hold, and the cross-thread store.

Knows nothing of agents, approvals or HTTP. docs/storage.md draws the tables.
"""

import uuid

from django.db import models

from checkpoints.fields import CompactJSONField


class ThreadStatus(models.TextChoices):
    RUNNING = "running"
    WAITING = "waiting"  # at an approval gate
    PAUSED = "paused"  # by an operator
    DONE = "done"
    FAILED = "failed"
    CANCELLED = "cancelled"


class CheckpointSource(models.TextChoices):
    INPUT = "input"
    STEP = "step"
    RESUME = "resume"
    UPDATE = "update"
    FORK = "fork"


class Thread(models.Model):
    id = models.CharField(primary_key=True, max_length=100)
    # No query looks up threads by head (a head is never deleted: delete_thread clears it,
    # pruning keeps it), so it has no index.
    agent = models.CharField(max_length=100)
    status = models.CharField(max_length=16, choices=ThreadStatus, default=ThreadStatus.RUNNING)
    head = models.ForeignKey(
        "Checkpoint", null=True, blank=True, on_delete=models.DO_NOTHING, related_name="+", db_index=False
    )
    metadata = models.JSONField(default=dict, blank=True)
    # Single writer per thread: the worker holding an unexpired lease is the only one
    # allowed to run a step.
    lease_owner = models.CharField(max_length=200, blank=True, default="")
    lease_expires_at = models.DateTimeField(null=True, blank=True)
    error = models.TextField(blank=True, default="")
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)

    class Meta:
        ordering = ["-created_at"]
        # The thread list's orders and filters (approvals.thread_selectors; bench_threads). Each
        # index costs every checkpoint write a little: the head move updates this row.
        indexes = [
            models.Index(fields=["-updated_at", "id"], name="thread_recent"),
            models.Index(fields=["status", "updated_at"]),
            models.Index(fields=["agent", "status", "-updated_at"], name="thread_agent_status"),
        ]

    def __str__(self) -> str:
        return self.id


class Checkpoint(models.Model):
    """A snapshot of a thread's state. Its values live in StoredValue rows named by `refs`."""

    id = models.UUIDField(primary_key=True, default=uuid.uuid4, editable=False)
    # Indexed by (thread, -created_at) below.
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="checkpoints", db_index=False)
    # Retention re-links a kept checkpoint to its nearest kept ancestor before pruning the
    # ones between; SET_NULL is the backstop, so a delete never cascades down a branch.
    parent = models.ForeignKey(
        "self", null=True, blank=True, on_delete=models.SET_NULL, related_name="children"
    )
    step = models.PositiveIntegerField()
    source = models.CharField(max_length=16, choices=CheckpointSource)
    refs = CompactJSONField(default=dict)
    """Field name -> ["i", value] inline, ["v", digest] a stored value, or
    ["l", chain digest, length, [[run, first depth], ...]] a list (storage/layout.py)."""
    # Compact text, not jsonb: every byte of a row is paid once per step, and nobody queries these.
    next = CompactJSONField(default=list)
    node = models.CharField(max_length=100, blank=True, default="")
    created_by = models.CharField(max_length=200, blank=True, default="")
    schema_version = models.PositiveIntegerField(default=1)
    metadata = CompactJSONField(default=dict, blank=True)
    digest = models.BinaryField(max_length=32)
    """SHA-256 (checkpoints.digest); CheckpointData spells it in hex."""
    size_bytes = models.PositiveIntegerField(default=0)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        ordering = ["thread", "-created_at"]
        indexes = [models.Index(fields=["thread", "-created_at"])]

    def __str__(self) -> str:
        return f"{self.thread_id}@{self.step}"


class StoredValue(models.Model):
    """One value, written once: a field's value keyed by the SHA-256 of its canonical JSON, or a
    list item keyed by the chain digest of the list up to it (`prev` is the item before)."""

    pk = models.CompositePrimaryKey("thread_id", "key")
    # The primary key leads with the thread, so it also serves the thread's lookups.
    thread = models.ForeignKey(Thread, on_delete=models.CASCADE, related_name="+", db_index=False)
    key = models.BinaryField(max_length=16)
    prev = models.BinaryField(max_length=16, null=True)
    data = models.TextField()
    """Canonical JSON, or its Fernet token when encrypted."""
    run = models.IntegerField(null=True)
    depth = models.PositiveIntegerField(null=True)
    """A list item's run and index: a list reads back as one range scan per run."""

    class Meta:
        indexes = [
            models.Index(
                fields=["thread", "run", "depth"],
                name="storedvalue_run",
                condition=models.Q(run__isnull=False),
            )
        ]

    def __str__(self) -> str:
        return f"{self.thread_id}/{bytes(self.key).hex()[:12]}"


class PendingWrite(models.Model):
    """The result of one unit of work inside a step, stored the moment it finished."""

    # Indexed by the (checkpoint, task_id) unique constraint.
    checkpoint = models.ForeignKey(
        Checkpoint, on_delete=models.CASCADE, related_name="writes", db_index=False
    )
    task_id = models.CharField(max_length=200)
    kind = models.CharField(max_length=32)
    data = models.TextField()
    """Canonical JSON of the value, or its Fernet token when encrypted."""
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["checkpoint", "task_id"], name="unique_write_per_task")
        ]

    def __str__(self) -> str:
        return f"{self.checkpoint_id}/{self.task_id}"


class StoreItem(models.Model):
    """Cross-thread memory: a JSON value under (tenant, namespace, key), optionally expiring."""

    tenant = models.CharField(max_length=200)
    namespace = models.CharField(max_length=500, blank=True, default="")
    """The namespace after the tenant, each element followed by NAMESPACE_SEPARATOR."""
    key = models.CharField(max_length=200)
    data = models.TextField()
    """Canonical JSON of the value, or its Fernet token when encrypted."""
    created_at = models.DateTimeField(auto_now_add=True)
    updated_at = models.DateTimeField(auto_now=True)
    expires_at = models.DateTimeField(null=True, blank=True)

    class Meta:
        constraints = [
            models.UniqueConstraint(fields=["tenant", "namespace", "key"], name="unique_store_key")
        ]
        indexes = [models.Index(fields=["expires_at"])]

    def __str__(self) -> str:
        return f"{self.tenant}:{self.namespace}{self.key}"


class LangGraphCheckpoint(models.Model):
    """A LangGraph checkpoint (checkpoints.langgraph.GatehouseSaver): header, metadata and where
    each channel's value lives. Values are LangGraphBlob rows, so an unchanged one costs nothing."""

    pk = models.CompositePrimaryKey("thread_id", "checkpoint_ns", "checkpoint_id")
    thread_id = models.CharField(max_length=255)
    checkpoint_ns = models.CharField(max_length=255, blank=True, default="")
    checkpoint_id = models.CharField(max_length=64)
    """LangGraph's uuid6: ordered by time, so the newest is the greatest."""
    parent_id = models.CharField(max_length=64, blank=True, default="")
    agent = models.CharField(max_length=100, blank=True, default="")
    """The Gatehouse agent whose retention policy applies ("" for none)."""
    header = models.BinaryField()
    """The checkpoint without its values (versions, versions seen, ts), serde-typed; sealed
    when encrypting."""
    refs = CompactJSONField(default=dict)
    """Channel -> ["v", digest] a stored value, or ["l", chain digest, length] a persistent list."""
    metadata = models.JSONField(default=dict)
    digest = models.BinaryField(max_length=32)
    created_at = models.DateTimeField(auto_now_add=True)

    class Meta:
        indexes = [models.Index(fields=["agent", "created_at"], name="lgcheckpoint_agent")]

    def __str__(self) -> str:
        return f"{self.thread_id}/{self.checkpoint_ns}@{self.checkpoint_id}"


class LangGraphBlob(models.Model):
    """One serialized channel value or list item, written once per thread (see docs/storage.md)."""

    pk = models.CompositePrimaryKey("thread_id", "key")
    thread_id = models.CharField(max_length=255)
    key = models.BinaryField(max_length=16)
    """First 16 bytes of the value's SHA-256, or of a list's chain digest up to this item."""
    prev = models.BinaryField(max_length=16, null=True)
    """For a list item: the key of the item before it."""
    data = models.BinaryField()
    """b"<serde type>\\0<bytes>", or its Fernet token when encrypting."""

    def __str__(self) -> str:
        return f"{self.thread_id}/{bytes(self.key).hex()[:12]}"


class LangGraphWrite(models.Model):
    """A pending write of one task to one LangGraph checkpoint, keyed by (task_id, idx)."""

    pk = models.CompositePrimaryKey("thread_id", "checkpoint_ns", "checkpoint_id", "task_id", "idx")
    thread_id = models.CharField(max_length=255)
    checkpoint_ns = models.CharField(max_length=255, blank=True, default="")
    checkpoint_id = models.CharField(max_length=64)
    task_id = models.CharField(max_length=255)
    idx = models.IntegerField()
    channel = models.CharField(max_length=255)
    task_path = models.CharField(max_length=1000, blank=True, default="")
    data = models.BinaryField()
    """b"<serde type>\\0<bytes>", or its Fernet token when encrypting."""
    digest = models.BinaryField(max_length=32)
    """SHA-256 of the channel name, NUL, and the plain data."""

    def __str__(self) -> str:
        return f"{self.thread_id}@{self.checkpoint_id}/{self.task_id}/{self.idx}"
