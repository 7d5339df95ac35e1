"""Helpers shared by the contract suite's modules."""

import random
import string
from typing import Any

from checkpoints.backends.base import BaseCheckpointBackend, CheckpointData, NewCheckpoint, ThreadData
from checkpoints.models import CheckpointSource, ThreadStatus

THREAD = "thread-1"
MISSING_UUID = "00000000-0000-4000-8000-000000000000"


def new(values: dict[str, Any] | None = None, **fields: Any) -> NewCheckpoint:
    return NewCheckpoint(
        values=values or {"n": 0}, source=fields.pop("source", CheckpointSource.STEP), **fields
    )


def start(
    backend: BaseCheckpointBackend, thread_id: str = THREAD, **fields: Any
) -> tuple[ThreadData, CheckpointData]:
    return backend.create_thread(
        thread_id=thread_id,
        agent=fields.pop("agent", "refunds"),
        first=new(fields.pop("values", {"n": 0}), source=CheckpointSource.INPUT, next=["model"]),
        status=fields.pop("status", ThreadStatus.RUNNING),
        **fields,
    )


def put_after(
    backend: BaseCheckpointBackend,
    parent: CheckpointData,
    *,
    expected_head: str | None = None,
    n: int = 1,
    status: ThreadStatus = ThreadStatus.RUNNING,
) -> CheckpointData:
    """Write a checkpoint under parent, expecting parent to be the head unless told otherwise."""
    return backend.put(
        thread_id=parent.thread_id,
        parent_id=parent.id,
        expected_head=parent.id if expected_head is None else expected_head,
        checkpoint=new({"n": n}, next=["tools"]),
        status=status,
    )


def write(
    backend: BaseCheckpointBackend, parent: CheckpointData, values: dict[str, Any], *, head: str | None = None
) -> CheckpointData:
    """Write values under parent (a fork when head, the thread's head, is another checkpoint)."""
    return backend.put(
        thread_id=parent.thread_id,
        parent_id=parent.id,
        expected_head=head or parent.id,
        checkpoint=new(values),
        status=ThreadStatus.RUNNING,
    )


def message(i: int, size: int = 2000) -> dict[str, Any]:
    """A list item of about `size` bytes of JSON, incompressible (so storage sizes are honest)."""
    text = "".join(random.Random(i).choices(string.ascii_letters, k=size))
    return {"id": f"m{i}", "role": "assistant", "content": f"{i}:{text}"}


def conversation(backend: BaseCheckpointBackend, *, items: int, size: int = 2000) -> list[CheckpointData]:
    """A thread whose every step appends one message; return its checkpoints, oldest first."""
    _, head = start(backend, values={"messages": [message(0, size)]})
    written = [head]
    for i in range(1, items):
        written.append(
            write(backend, written[-1], {"messages": [*written[-1].values["messages"], message(i, size)]})
        )
    return written


def ids(checkpoints: list[Any]) -> list[str]:
    return [c.id for c in checkpoints]
