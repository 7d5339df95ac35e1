"""A retried step task that finds the head moved on sends the head's follow-up again (its earlier
attempt's commit may have landed with the reply lost); a first delivery that finds it stale does
not, or every duplicate would echo one more per step. The fault itself, through a proxy that cuts
the COMMIT's reply, is tests/test_faults_commit_lost.py."""

from collections.abc import Iterator
from typing import Any

import pytest

from agents import signals
from agents.runtime import run_step
from checkpoints.backends.base import NewCheckpoint
from checkpoints.backends.memory import MemoryBackend
from checkpoints.models import CheckpointSource, ThreadStatus

pytestmark = pytest.mark.usefixtures("memory_backend")


@pytest.fixture
def announced() -> Iterator[list[dict[str, Any]]]:
    """The thread_changed signals sent, as their keyword arguments."""
    sent: list[dict[str, Any]] = []

    def receiver(sender: Any, **kwargs: Any) -> None:
        sent.append({k: v for k, v in kwargs.items() if k != "signal"})

    signals.thread_changed.connect(receiver, dispatch_uid="test_stale_retry")
    yield sent
    signals.thread_changed.disconnect(dispatch_uid="test_stale_retry")


def moved_on(backend: MemoryBackend) -> tuple[str, str]:
    """A thread whose head moved past its first checkpoint to a gate: (first id, head id)."""
    _, first = backend.create_thread(
        thread_id="thread-1",
        agent="unit-refunds",
        first=NewCheckpoint(values={}, source=CheckpointSource.INPUT, next=["model"]),
        status=ThreadStatus.RUNNING,
    )
    head = backend.put(
        thread_id="thread-1",
        parent_id=first.id,
        expected_head=first.id,
        checkpoint=NewCheckpoint(values={}, source=CheckpointSource.STEP, next=["tools"], node="model"),
        status=ThreadStatus.WAITING,
    )
    return first.id, head.id


@pytest.mark.django_db
def test_a_retried_step_that_finds_its_head_moved_on_announces_the_head_again(
    memory_backend: MemoryBackend, announced: list[dict[str, Any]], django_capture_on_commit_callbacks: Any
) -> None:
    first, head = moved_on(memory_backend)

    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_step(thread_id="thread-1", checkpoint_id=first, worker="w1", retried=True)

    assert outcome.kind == "stale"
    assert announced == [
        {"thread_id": "thread-1", "checkpoint_id": head, "status": ThreadStatus.WAITING, "resent": True}
    ]
    assert memory_backend.claim(thread_id="thread-1", owner="w2", ttl_s=60) is not None  # released


@pytest.mark.django_db
def test_a_first_delivery_that_finds_its_head_moved_on_sends_nothing(
    memory_backend: MemoryBackend, announced: list[dict[str, Any]], django_capture_on_commit_callbacks: Any
) -> None:
    first, _ = moved_on(memory_backend)

    with django_capture_on_commit_callbacks(execute=True):
        outcome = run_step(thread_id="thread-1", checkpoint_id=first, worker="w1")

    assert outcome.kind == "stale"
    assert announced == []
