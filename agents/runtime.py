"""The step runtime: advance one thread by one node, from its stored head, as its single writer."""

import logging
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.db import transaction

from agents import signals
from agents.graph import Agent, Step, StepContext
from agents.lease import held_lease
from agents.registry import registry
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData, CorruptCheckpoint, NewCheckpoint
from checkpoints.models import CheckpointSource, ThreadStatus

logger = logging.getLogger(__name__)

DECISION_PREFIX = "decision:"
GATES_KEY = "gates"  # checkpoint metadata: the keys of the gates opened at this checkpoint
RESULT_PREFIX = "result:"


@dataclass(frozen=True)
class StepOutcome:
    kind: str
    """stepped | stale (head moved) | busy (another worker holds the lease) | idle | failed"""
    checkpoint_id: str | None = None
    status: ThreadStatus | None = None


class _Superseded(Exception):
    """The head or status moved while the step ran; its result is discarded."""


def run_step(*, thread_id: str, checkpoint_id: str, worker: str) -> StepOutcome:
    """Run the node after checkpoint_id, if it is still the head of a running thread."""
    with held_lease(thread_id=thread_id, owner=worker, ttl_s=settings.THREAD_LEASE_S) as held:
        if not held:
            return StepOutcome("busy")
        return _run_claimed(thread_id=thread_id, checkpoint_id=checkpoint_id, worker=worker)


def _run_claimed(*, thread_id: str, checkpoint_id: str, worker: str) -> StepOutcome:
    backend = get_backend()
    thread = backend.get_thread(thread_id=thread_id)
    if thread.head_id != checkpoint_id:
        return StepOutcome("stale")
    if thread.status != ThreadStatus.RUNNING:
        return StepOutcome("idle", status=thread.status)
    try:
        head = backend.get(thread_id=thread_id, checkpoint_id=checkpoint_id)
    except CorruptCheckpoint as exc:
        # Not retryable: left running, the reconciler would re-enqueue it forever.
        logger.error("thread %s cannot step: %s", thread_id, exc)
        fail_thread(thread_id=thread_id, checkpoint_id=checkpoint_id, error=str(exc))
        return StepOutcome("failed", status=ThreadStatus.FAILED)
    agent = registry.get(thread.agent)
    if not head.next:
        backend.set_status(thread_id=thread_id, status=ThreadStatus.DONE, expected_head=head.id)
        return StepOutcome("idle", status=ThreadStatus.DONE)
    context = StepContext(
        thread_id=thread_id,
        checkpoint_id=head.id,
        decisions=decisions_at(thread_id=thread_id, checkpoint_id=head.id),
        run_once=partial(_run_once, thread_id, head.id),
    )
    try:
        state = load_state(agent, head)
        step = agent.nodes[head.next[0]](state, context)
        # Fold the update into the upgraded state, so a thread stored at an older schema
        # version steps on at the current one.
        values = agent.state.apply(state.model_dump(mode="json"), step.update)
    except RETRYABLE:
        raise
    except Exception as exc:
        logger.exception("step failed on thread %s", thread_id)
        fail_thread(thread_id=thread_id, checkpoint_id=head.id, error=f"{type(exc).__name__}: {exc}")
        return StepOutcome("failed", status=ThreadStatus.FAILED)
    try:
        written = _commit(agent=agent, head=head, step=step, values=values, worker=worker)
    except _Superseded:
        return StepOutcome("stale")
    return StepOutcome("stepped", checkpoint_id=written.id)


def load_state(agent: Agent, checkpoint: CheckpointData) -> Any:
    values = checkpoint.values
    if checkpoint.schema_version < agent.state.schema_version:
        values = agent.state.upgrade(values, from_version=checkpoint.schema_version)
    return agent.state.model_validate(values)


def decisions_at(*, thread_id: str, checkpoint_id: str) -> dict[str, dict[str, Any]]:
    writes = get_backend().get_writes(thread_id=thread_id, checkpoint_id=checkpoint_id)
    return {
        task_id.removeprefix(DECISION_PREFIX): value
        for task_id, (kind, value) in writes.items()
        if kind == "decision"
    }


def _next_status(step: Step, *, current: ThreadStatus) -> ThreadStatus:
    if step.gates:
        return ThreadStatus.WAITING
    if step.goto is None:
        return ThreadStatus.DONE
    # An operator's pause holds between steps: the step's work is kept, the next one waits.
    return ThreadStatus.PAUSED if current == ThreadStatus.PAUSED else ThreadStatus.RUNNING


def _commit(
    *, agent: Agent, head: CheckpointData, step: Step, values: dict[str, Any], worker: str
) -> CheckpointData:
    backend = get_backend()
    with transaction.atomic():
        thread = backend.lock_thread(thread_id=head.thread_id)
        if thread.head_id != head.id or thread.status not in (ThreadStatus.RUNNING, ThreadStatus.PAUSED):
            raise _Superseded
        status = _next_status(step, current=thread.status)
        written = backend.put(
            thread_id=head.thread_id,
            parent_id=head.id,
            expected_head=head.id,
            checkpoint=NewCheckpoint(
                values=values,
                source=CheckpointSource.RESUME if step.resumed else CheckpointSource.STEP,
                next=[step.goto] if step.goto else [],
                node=head.next[0],
                created_by=f"worker:{worker}",
                schema_version=agent.state.schema_version,
                metadata={**step.metadata, GATES_KEY: [gate.key for gate in step.gates]},
            ),
            status=status,
        )
        if step.gates:
            signals.gates_opened.send(
                sender=Agent, thread_id=head.thread_id, agent=agent.name, checkpoint=written, gates=step.gates
            )
        if status == ThreadStatus.RUNNING and written.step >= settings.MAX_STEPS_PER_THREAD:
            status = ThreadStatus.FAILED
            backend.set_status(
                thread_id=head.thread_id,
                status=status,
                error=f"stopped after {written.step} steps (MAX_STEPS_PER_THREAD)",
            )
        after_commit(thread_id=head.thread_id, checkpoint_id=written.id, status=status)
    return written


def after_commit(*, thread_id: str, checkpoint_id: str | None, status: ThreadStatus) -> None:
    """Once the caller's transaction commits: tell listeners, and enqueue the next step if running."""

    def notify() -> None:
        try:
            signals.thread_changed.send(
                sender=Agent, thread_id=thread_id, checkpoint_id=checkpoint_id, status=status
            )
        except Exception:  # a page missing one refresh must not stop the run
            logger.exception("could not announce the change of thread %s", thread_id)
        if status == ThreadStatus.RUNNING and checkpoint_id:
            enqueue_step(thread_id=thread_id, checkpoint_id=checkpoint_id)

    transaction.on_commit(notify)


def enqueue_step(*, thread_id: str, checkpoint_id: str) -> None:
    """Send the step task. If the broker is unreachable, log it and go on: the commit stands, the
    thread is `running` in the database, and the reconciler re-enqueues it once Redis is back."""
    from agents.tasks import advance_thread_task

    try:
        advance_thread_task.delay(thread_id, checkpoint_id)
    except Exception as exc:
        logger.warning(
            "could not enqueue the next step of thread %s (%s); the reconciler will", thread_id, exc
        )


def fail_thread(*, thread_id: str, checkpoint_id: str, error: str) -> None:
    with transaction.atomic():
        if get_backend().set_status(
            thread_id=thread_id, status=ThreadStatus.FAILED, expected_head=checkpoint_id, error=error[:2000]
        ):
            after_commit(thread_id=thread_id, checkpoint_id=checkpoint_id, status=ThreadStatus.FAILED)


class _AlreadyRecorded(Exception):
    pass


def _run_once(thread_id: str, checkpoint_id: str, key: str, fn: Any) -> Any:
    """Return the recorded result of (checkpoint, key), or run fn and record it atomically with
    whatever fn wrote to the database: a finished local side effect is never repeated."""
    backend = get_backend()
    task_id = RESULT_PREFIX + key
    recorded = backend.get_writes(thread_id=thread_id, checkpoint_id=checkpoint_id).get(task_id)
    if recorded is not None:
        return recorded[1]
    try:
        with transaction.atomic():
            value = fn()
            if not backend.put_write(
                thread_id=thread_id, checkpoint_id=checkpoint_id, task_id=task_id, kind="result", value=value
            ):
                raise _AlreadyRecorded  # roll back our copy of the side effect
    except _AlreadyRecorded:
        return backend.get_writes(thread_id=thread_id, checkpoint_id=checkpoint_id)[task_id][1]
    return value


def _retryable() -> tuple[type[Exception], ...]:
    from django.db import InterfaceError, OperationalError

    from agents.llm import ModelUnavailable

    return (ModelUnavailable, OperationalError, InterfaceError)


RETRYABLE = _retryable()
