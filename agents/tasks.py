"""Celery tasks: thin, take ids, call the runtime."""

from celery import Task, shared_task
from django.conf import settings

from agents import dispatch, runtime
from agents.lease import RENEWALS_PER_LEASE
from checkpoints.orphans import find_orphans, take_orphan

MAX_RETRIES = 8
# A step hands its lease off in its commit and releases it once it has sent the next step:
# a lapsed lease still named is a worker that died in between, unless it is this fresh.
HANDOFF_GRACE_S = 2
RETRYABLE: tuple[type[Exception], ...] = (*runtime.RETRYABLE, runtime.RetryFrom)


def busy_countdown(*, busy: int) -> float:
    """Back off from a quarter second up to one heartbeat period (a third of the lease)."""
    return min(0.25 * 2**busy, settings.THREAD_LEASE_S / RENEWALS_PER_LEASE)


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def advance_thread_task(
    self: Task, thread_id: str, checkpoint_id: str, busy: int = 0, chain: bool = True
) -> str:
    """Run the thread's step at checkpoint_id; chain: then its next steps too, for up to
    STEP_CHAIN_S (a step a person resumed runs alone on the resume queue)."""
    worker = f"{self.request.hostname}:{self.request.id}"
    errors = self.request.retries - busy  # busy retries are not errors
    try:
        outcome = runtime.run_step(
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            worker=worker,
            chain_s=settings.STEP_CHAIN_S if chain else 0,
            retried=errors > 0,
        )
    except RETRYABLE as exc:
        # A later step of the chain is retried from the head the earlier ones committed.
        head = exc.checkpoint_id if isinstance(exc, runtime.RetryFrom) else checkpoint_id
        if errors >= MAX_RETRIES:
            runtime.fail_thread(thread_id=thread_id, checkpoint_id=head, error=str(exc))
            return "failed"
        raise self.retry(
            exc=exc,
            countdown=min(2**errors, 30),
            max_retries=None,
            args=(thread_id, head),
            kwargs={"busy": busy, "chain": chain},
        ) from exc
    if outcome.kind == "busy" and not self.request.is_eager:
        # Another worker holds the lease. Retry until it is ours or the head has moved on: a
        # live holder renews its lease and commits (we then find ourselves stale); a dead one's
        # lease lapses within THREAD_LEASE_S and we take it. No retry limit, no reconciler.
        raise self.retry(
            countdown=busy_countdown(busy=busy),
            max_retries=None,
            args=(thread_id, checkpoint_id),
            kwargs={"busy": busy + 1, "chain": chain},
        )
    return outcome.kind


@shared_task
def reconcile_threads_task() -> int:
    """Re-send the steps of running threads that nobody runs and that no task is queued for.

    Lost: a lapsed lease still named (its worker died mid-step or before sending the next
    step, or the broker refused the send) is re-sent at once. Queued: a thread with no lease
    was handed to the broker; it waits its turn and is re-sent only after
    RECONCILE_QUEUED_AFTER_S (the broker lost it: a flush, or a dead worker's unstarted task).
    Either way the thread is then marked queued afresh, so one pass never echoes the next."""
    orphans = find_orphans(handoff_grace_s=HANDOFF_GRACE_S, queued_after_s=settings.RECONCILE_QUEUED_AFTER_S)
    sent = 0
    for orphan in orphans:
        if take_orphan(orphan):
            dispatch.enqueue_step(thread_id=orphan.thread_id, checkpoint_id=str(orphan.head_id))
            sent += 1
    return sent
