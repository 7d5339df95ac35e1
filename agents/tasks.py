"""Celery tasks: thin, take ids, call the runtime."""

from datetime import timedelta

from celery import Task, shared_task
from django.conf import settings
from django.db.models import Q
from django.utils import timezone

from agents import runtime
from checkpoints.models import Thread, ThreadStatus

MAX_RETRIES = 8


@shared_task(bind=True, acks_late=True, max_retries=MAX_RETRIES)
def advance_thread_task(self: Task, thread_id: str, checkpoint_id: str) -> str:
    worker = f"{self.request.hostname}:{self.request.id}"
    try:
        outcome = runtime.run_step(thread_id=thread_id, checkpoint_id=checkpoint_id, worker=worker)
    except runtime.RETRYABLE as exc:
        if self.request.retries >= MAX_RETRIES:
            runtime.fail_thread(thread_id=thread_id, checkpoint_id=checkpoint_id, error=str(exc))
            return "failed"
        raise self.retry(exc=exc, countdown=min(2**self.request.retries, 30)) from exc
    if outcome.kind == "busy" and self.request.retries < 5:
        # Another worker holds the lease; try again shortly (the reconciler is the backstop).
        raise self.retry(countdown=1)
    return outcome.kind


@shared_task
def reconcile_threads_task() -> int:
    """Re-enqueue running threads that nobody is working on (lost task, dead worker)."""
    now = timezone.now()
    quiet_since = now - timedelta(seconds=settings.RECONCILE_INTERVAL_S)
    orphans = (
        Thread.objects.filter(status=ThreadStatus.RUNNING, updated_at__lt=quiet_since, head__isnull=False)
        .filter(Q(lease_expires_at__isnull=True) | Q(lease_expires_at__lt=now))
        .values_list("id", "head_id")[:500]
    )
    for thread_id, head_id in orphans:
        advance_thread_task.delay(thread_id, str(head_id))
    return len(orphans)
