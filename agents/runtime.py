"""The step runtime: advance a thread node by node from its stored head, as its single writer."""

import logging
import time
from dataclasses import dataclass
from functools import partial
from typing import Any

from django.conf import settings
from django.db import connection, transaction

from agents import gates
from agents.dispatch import after_commit
from agents.graph import Agent, Step, StepContext
from agents.lease import held_lease
from agents.loading import upgraded_values
from agents.registry import registry
from checkpoints.backends import get_backend
from checkpoints.backends.base import (
    CheckpointData,
    CorruptCheckpoint,
    NewCheckpoint,
    ThreadData,
    ThreadNotFound,
)
from checkpoints.models import CheckpointSource, ThreadStatus

logger = logging.getLogger(__name__)

RESULT_PREFIX = "result:"


@dataclass(frozen=True)
class StepOutcome:
    kind: str
    """stepped | stale (head moved) | busy (another worker holds the lease) | idle | failed |
    gone (the thread was deleted)"""
    checkpoint_id: str | None = None
    status: ThreadStatus | None = None


class _Superseded(Exception):
    """The head or status moved while the step ran; its result is discarded."""


class EffectWithdrawn(Exception):
    """An operator cancelled, edited or forked the thread before a tool of its step ran: the
    tool does not run, and the step is stale."""


STEPPING = (ThreadStatus.RUNNING, ThreadStatus.PAUSED)  # a pause lets the step in flight finish


class RetryFrom(Exception):
    """A step after the first of a chain failed in a way worth retrying: the task retries it
    from checkpoint_id, the head its earlier steps committed."""

    def __init__(self, checkpoint_id: str, error: Exception) -> None:
        super().__init__(str(error))
        self.checkpoint_id = checkpoint_id
        self.error = error


def run_step(
    *, thread_id: str, checkpoint_id: str, worker: str, chain_s: float = 0, retried: bool = False
) -> StepOutcome:
    """Run the node after checkpoint_id, if it is still the head of a running thread. Within
    chain_s of starting, run the thread's next node too, and so on, under the same lease: each
    step still commits its checkpoint, but the next one needs no broker round trip, no claim and
    no head load (docs/architecture.md, "Chained steps"). retried: an earlier attempt of this
    task failed with an error, perhaps after its commit landed."""
    try:
        with held_lease(thread_id=thread_id, owner=worker, ttl_s=settings.THREAD_LEASE_S) as claim:
            if claim is None:
                get_backend().get_thread(thread_id=thread_id)  # no lease to take: is it there?
                return StepOutcome("busy")
            thread = claim.thread
            if thread.head_id == checkpoint_id:
                return _run_claimed(
                    thread=thread, checkpoint_id=checkpoint_id, worker=worker, ends=time.monotonic() + chain_s
                )
    except ThreadNotFound:
        # Deleted (by an operator or retention) after its step was sent, or while it ran: nothing
        # is left to run or to write, and a busy retry would wait for a lease nobody can take.
        return StepOutcome("gone")
    if retried or claim.lapsed_owner:
        # The earlier attempt's COMMIT may have landed with its answer lost (the connection died):
        # its on-commit follow-up never ran and, the lease now released, nothing would send the
        # head's step before the reconciler's queued rule (RECONCILE_QUEUED_AFTER_S). Likewise a
        # first delivery redelivered because its worker died after the COMMIT, before sending the
        # next step: it took that worker's lapsed lease, still named (a step that sent its
        # follow-up has released it; the name is this task's own if it was redelivered to the
        # same worker node), and releasing it erased the reconciler's only sign of that.
        # Sent again here, after the release so the step does not find the lease busy; if the
        # follow-up did run, the duplicate step is stale and the pushes re-render what is already
        # shown. A stale duplicate that found the lease free (released) or its own live one sends
        # nothing: every stale task doing it would echo a duplicate per step.
        after_commit(thread_id=thread_id, checkpoint_id=thread.head_id, status=thread.status, resent=True)
    return StepOutcome("stale")


def _run_claimed(*, thread: ThreadData, checkpoint_id: str, worker: str, ends: float) -> StepOutcome:
    """Run the step at checkpoint_id, the head of the thread as claimed."""
    backend = get_backend()
    thread_id = thread.id
    if thread.status != ThreadStatus.RUNNING:
        return StepOutcome("idle", status=thread.status)
    try:
        head = backend.get(thread_id=thread_id, checkpoint_id=checkpoint_id)
    except CorruptCheckpoint as exc:
        logger.error("thread %s cannot step: %s", thread_id, exc)
        return _failed(thread_id=thread_id, checkpoint_id=checkpoint_id, error=str(exc))
    try:
        agent = registry.get(thread.agent)
        outcome, written = _step(agent=agent, head=head, worker=worker, ends=ends)
        while written is not None:
            head = written
            outcome, written = _step(agent=agent, head=head, worker=worker, ends=ends)
    except RETRYABLE as exc:
        if head.id == checkpoint_id:
            raise
        raise RetryFrom(head.id, exc) from exc
    except ThreadNotFound:
        raise  # deleted meanwhile: "gone", nothing to fail
    except Exception as exc:
        # Outside the node (an agent no longer registered, a decision that cannot be opened, a
        # gate's receiver that raised): a retry would fail alike, so the thread fails here.
        logger.exception("step failed on thread %s", thread_id)
        return _failed(thread_id=thread_id, checkpoint_id=head.id, error=f"{type(exc).__name__}: {exc}")
    return outcome


def _failed(*, thread_id: str, checkpoint_id: str, error: str) -> StepOutcome:
    # Not retryable: left running, the reconciler would re-send the step forever.
    fail_thread(thread_id=thread_id, checkpoint_id=checkpoint_id, error=error)
    return StepOutcome("failed", status=ThreadStatus.FAILED)


def _step(
    *, agent: Agent, head: CheckpointData, worker: str, ends: float
) -> tuple[StepOutcome, CheckpointData | None]:
    """Run the node after head and commit it; the checkpoint written too if this task runs the
    thread's next step itself (it is running and the chain has time left)."""
    thread_id = head.thread_id
    if not head.next:
        get_backend().set_status(
            thread_id=thread_id, status=ThreadStatus.DONE, expected_head=head.id, only_from=STEPPING
        )
        return StepOutcome("idle", status=ThreadStatus.DONE), None
    context = StepContext(
        thread_id=thread_id,
        checkpoint_id=head.id,
        decisions=gates.decisions_for(head),
        run_once=partial(_run_once, thread_id, head.id),
    )
    try:
        state = load_state(agent, head)
        release_connection()
        step = agent.nodes[head.next[0]](state, context)
        # Fold the update into the upgraded state, so a thread stored at an older schema
        # version steps on at the current one.
        values = agent.state.apply(state.model_dump(mode="json"), step.update)
    except EffectWithdrawn as exc:
        logger.info("%s", exc)
        return StepOutcome("stale"), None
    except RETRYABLE:
        raise
    except Exception as exc:
        logger.exception("step failed on thread %s", thread_id)
        return _failed(thread_id=thread_id, checkpoint_id=head.id, error=f"{type(exc).__name__}: {exc}"), None
    runs_on = time.monotonic() < ends
    try:
        written, status = _commit(
            agent=agent, head=head, step=step, values=values, worker=worker, runs_on=runs_on
        )
    except _Superseded:
        return StepOutcome("stale"), None
    outcome = StepOutcome("stepped", checkpoint_id=written.id, status=status)
    return outcome, written if runs_on and status == ThreadStatus.RUNNING else None


def load_state(agent: Agent, checkpoint: CheckpointData) -> Any:
    """The checkpoint's state at the agent's current schema version; raises if it cannot be."""
    values = upgraded_values(agent, checkpoint.values, schema_version=checkpoint.schema_version)
    return agent.state.model_validate(values)


def _next_status(step: Step, *, current: ThreadStatus) -> ThreadStatus:
    if step.goto is None and not step.gates:
        return ThreadStatus.DONE
    # An operator's pause holds between steps: the step's work is kept (its gates open, so
    # reviewers can decide them), but nothing runs on, a gated tool included, until resume.
    if current == ThreadStatus.PAUSED:
        return ThreadStatus.PAUSED
    return ThreadStatus.WAITING if step.gates else ThreadStatus.RUNNING


def _commit(
    *, agent: Agent, head: CheckpointData, step: Step, values: dict[str, Any], worker: str, runs_on: bool
) -> tuple[CheckpointData, ThreadStatus]:
    """Commit the step; runs_on: this task runs the next step itself (no task is sent for it)."""
    backend = get_backend()
    with transaction.atomic():
        # Only the lease's holder commits: a step whose lease lapsed and was taken over (its
        # heartbeat could not renew it) is dropped even if it finishes first. Handing the lease
        # off here (it locks the thread too) lets the next step claim it at once instead of
        # finding it busy; if this step is superseded, the rollback undoes the hand-off. A step
        # whose task runs on keeps the lease instead.
        thread = backend.hand_off(
            thread_id=head.thread_id, owner=worker, ttl_s=settings.THREAD_LEASE_S if runs_on else 0
        )
        if thread is None:
            backend.get_thread(thread_id=head.thread_id)  # raises ThreadNotFound if deleted
            raise _Superseded
        if thread.head_id != head.id or thread.status not in STEPPING:
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
                metadata={**step.metadata, **gates.gate_metadata(step.gates)},
            ),
            status=status,
        )
        gates.open_gates(thread_id=head.thread_id, agent=agent.name, checkpoint=written, gates=step.gates)
        if status == ThreadStatus.RUNNING and written.step >= settings.MAX_STEPS_PER_THREAD:
            status = ThreadStatus.FAILED
            backend.set_status(
                thread_id=head.thread_id,
                status=status,
                error=f"stopped after {written.step} steps (MAX_STEPS_PER_THREAD)",
            )
        after_commit(thread_id=head.thread_id, checkpoint_id=written.id, status=status, send_step=not runs_on)
    return written, status


def release_connection() -> None:
    """Give a pooled connection back before the node waits on the model: the wait holds none.

    Without a pool the connection is kept (reopening one costs more than the step's queries)."""
    if getattr(connection, "pool", None) is not None and not connection.in_atomic_block:
        connection.close()


def fail_thread(*, thread_id: str, checkpoint_id: str, error: str) -> None:
    with transaction.atomic():
        # Not over an operator's cancel made while the step ran (failed may be resumed).
        if get_backend().set_status(
            thread_id=thread_id,
            status=ThreadStatus.FAILED,
            expected_head=checkpoint_id,
            error=error[:2000],
            only_from=(*STEPPING, ThreadStatus.WAITING),
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
            # Held to the commit: a cancel, edit or fork (which lock the thread) waits for the
            # side effect, or came first and it never runs (the step is then stale).
            thread = backend.hold_thread(thread_id=thread_id)
            if thread.head_id != checkpoint_id or thread.status not in STEPPING:
                raise EffectWithdrawn(f"thread {thread_id} moved on or was cancelled before {key} ran")
            value = fn()
            if not backend.put_write(
                thread_id=thread_id, checkpoint_id=checkpoint_id, task_id=task_id, kind="result", value=value
            ):
                raise _AlreadyRecorded  # roll back our copy of the side effect
    except _AlreadyRecorded:
        return backend.get_writes(thread_id=thread_id, checkpoint_id=checkpoint_id)[task_id][1]
    return value


def _retryable() -> tuple[type[Exception], ...]:
    from django.db import DatabaseError, InterfaceError

    from agents.llm import ModelUnavailable

    # Any database error, not only a lost connection: a tool's lock or statement timeout, a
    # deadlock, a serialization failure, or a transaction a tool left broken all roll the step's
    # work back with them, so running the step again is safe (and it fails after MAX_RETRIES).
    return (ModelUnavailable, DatabaseError, InterfaceError)


RETRYABLE = _retryable()
