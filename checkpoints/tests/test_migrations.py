"""Threads written by the whole-state store load the same after the move to linear storage."""

import hashlib
import uuid
from typing import Any

import pytest
from django.db import connection
from django.db.migrations.executor import MigrationExecutor
from django.utils import timezone

from checkpoints.backends.base import CorruptCheckpoint
from checkpoints.backends.orm import OrmBackend
from checkpoints.digest import canonical_json

BEFORE = [("checkpoints", "0001_initial")]


def old_digest(*, thread_id: str, parent_id: str | None, step: int, values: Any, next: list[str]) -> str:
    body = {
        "thread": thread_id,
        "parent": parent_id,
        "step": step,
        "values": values,
        "next": next,
        "schema_version": 1,
    }
    return hashlib.sha256(canonical_json(body).encode()).hexdigest()


def write_old_thread(
    apps: Any, *, thread_id: str, states: list[dict[str, Any]], tamper: int | None = None
) -> list[str]:
    """Store a thread as 0001's models did: every checkpoint's values whole."""
    Thread, Checkpoint = apps.get_model("checkpoints", "Thread"), apps.get_model("checkpoints", "Checkpoint")
    thread = Thread.objects.create(id=thread_id, agent="refunds", status="running")
    parent, ids = None, []
    for step, values in enumerate(states):
        pk = str(uuid.uuid4())
        digest = old_digest(thread_id=thread_id, parent_id=parent, step=step, values=values, next=["model"])
        stored = {"tampered": True} if step == tamper else values
        Checkpoint.objects.create(
            id=pk, thread=thread, parent_id=parent, step=step, source="step", values=stored, next=["model"],
            digest=digest, size_bytes=1, created_at=timezone.now(),
        )  # fmt: skip
        parent = pk
        ids.append(pk)
    thread.head_id = parent
    thread.save()
    return ids


@pytest.mark.django_db(transaction=True)
def test_checkpoints_stored_whole_are_moved_to_linear_storage_and_still_verify() -> None:
    executor = MigrationExecutor(connection)
    latest = executor.loader.graph.leaf_nodes()
    executor.migrate(BEFORE)
    old_apps = executor.loader.project_state(BEFORE).apps
    messages = [{"id": f"m{i}", "role": "user", "content": f"message {i}"} for i in range(4)]
    states = [{"messages": messages[: i + 1], "scratch": {"turn": i, "plan": "p" * 60}} for i in range(4)]
    sound = write_old_thread(old_apps, thread_id="old-1", states=states)
    tampered = write_old_thread(old_apps, thread_id="old-2", states=states, tamper=2)

    executor = MigrationExecutor(connection)
    executor.migrate(latest)

    backend = OrmBackend()
    for checkpoint_id, values in zip(sound, states, strict=True):
        loaded = backend.get(thread_id="old-1", checkpoint_id=checkpoint_id)
        assert loaded.values == values
        assert backend.verify(loaded) == loaded
    with pytest.raises(CorruptCheckpoint):
        backend.get(thread_id="old-2", checkpoint_id=tampered[2])
    assert backend.get(thread_id="old-2", checkpoint_id=tampered[1]).values == states[1]
