"""Shapes of the thread, history and time-travel endpoints."""

from datetime import datetime
from typing import Any

from ninja import Schema
from pydantic import ConfigDict

from checkpoints.backends.base import CheckpointData, CheckpointSummary
from checkpoints.models import Thread


class ThreadSummaryOut(Schema):
    id: str
    agent: str
    status: str
    head: str | None
    created_at: datetime
    updated_at: datetime

    @staticmethod
    def from_thread(thread: Thread) -> "ThreadSummaryOut":
        return ThreadSummaryOut(
            id=thread.id,
            agent=thread.agent,
            status=thread.status,
            head=str(thread.head_id) if thread.head_id else None,
            created_at=thread.created_at,
            updated_at=thread.updated_at,
        )


class CheckpointOut(Schema):
    id: str
    parent_id: str | None
    step: int
    source: str
    node: str
    next: list[str]
    created_by: str
    created_at: datetime
    schema_version: int
    digest: str
    size_bytes: int
    values: dict[str, Any] | None = None

    @staticmethod
    def from_data(c: CheckpointSummary) -> "CheckpointOut":
        return CheckpointOut(
            id=c.id,
            parent_id=c.parent_id,
            step=c.step,
            source=c.source,
            node=c.node,
            next=c.next,
            created_by=c.created_by,
            created_at=c.created_at,
            schema_version=c.schema_version,
            digest=c.digest,
            size_bytes=c.size_bytes,
            values=c.values if isinstance(c, CheckpointData) else None,
        )


class ChangeOut(Schema):
    kind: str
    path: str
    old: Any = None
    new: Any = None


class StateIn(Schema):
    model_config = ConfigDict(extra="forbid")

    values: dict[str, Any]
    """Fields to replace in the head's state (the others are kept)."""


class ForkIn(Schema):
    model_config = ConfigDict(extra="forbid")

    checkpoint_id: str
    values: dict[str, Any] | None = None


class MessageIn(Schema):
    model_config = ConfigDict(extra="forbid")

    input: str
