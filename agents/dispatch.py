"""After a thread's transaction commits: announce the change and enqueue the thread's next step."""

import logging

from django.conf import settings
from django.db import transaction

from agents import signals
from checkpoints.backends import get_backend
from checkpoints.models import ThreadStatus

logger = logging.getLogger(__name__)

UNSENT = "unsent"


def after_commit(
    *,
    thread_id: str,
    checkpoint_id: str | None,
    status: ThreadStatus,
    by_person: bool = False,
    send_step: bool = True,
    resent: bool = False,
) -> None:
    """Once the caller's transaction commits: tell listeners, and enqueue the next step if running.

    by_person: a person's action (a decision, resume, edit, fork) set the thread running; its
    step goes to RESUME_QUEUE, ahead of new threads' steps. send_step=False: the caller runs the
    next step itself (chained steps, agents.runtime). resent: this follows up a commit made
    earlier whose own follow-up may have been lost (agents.runtime.run_step); thread_changed
    then carries resent=True, for receivers that push more than the thread's page."""
    extra = {"resent": True} if resent else {}

    def notify() -> None:
        try:
            signals.thread_changed.send(
                sender=None, thread_id=thread_id, checkpoint_id=checkpoint_id, status=status, **extra
            )
        except Exception:  # a page missing one refresh must not stop the run
            logger.exception("could not announce the change of thread %s", thread_id)
        if send_step and status == ThreadStatus.RUNNING and checkpoint_id:
            enqueue_step(thread_id=thread_id, checkpoint_id=checkpoint_id, by_person=by_person)

    transaction.on_commit(notify)


def enqueue_step(*, thread_id: str, checkpoint_id: str, by_person: bool = False) -> None:
    """Send the step task. If the broker is unreachable, log it and go on: the commit stands, the
    thread is `running` in the database, and the reconciler re-enqueues it once Redis is back."""
    from agents.tasks import advance_thread_task

    if by_person and settings.RESUME_QUEUE:
        # One step on the resume queue's few threads; the rest of the run goes behind the others.
        task = advance_thread_task.s(thread_id, checkpoint_id, chain=False).set(queue=settings.RESUME_QUEUE)
    else:
        task = advance_thread_task.s(thread_id, checkpoint_id)
    try:
        task.apply_async()
    except Exception as exc:
        logger.warning(
            "could not enqueue the next step of thread %s (%s); the reconciler will", thread_id, exc
        )
        mark_unsent(thread_id=thread_id)


def mark_unsent(*, thread_id: str) -> None:
    """Leave a lapsed lease named UNSENT on the thread, so the reconciler re-sends its step at its
    next pass instead of taking it for a step queued in the broker."""
    try:
        get_backend().claim(thread_id=thread_id, owner=UNSENT, ttl_s=0)
    except Exception:
        logger.exception("could not mark thread %s as unsent", thread_id)
