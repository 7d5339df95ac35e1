"""Tell the configured notifiers about new pending requests and escalations.

Notifications never block a run: they are enqueued after the commit (a broker failure is
logged, not raised) on their own queue (NOTIFY_QUEUE), which the steps' workers do not consume,
and each (notifier, request) is its own Celery task that retries with backoff, so one slow or
failing receiver delays nobody else.

A notification carries the queue its event happened in, and is dropped if the request has moved
on by the time it is sent (a retry outlasting an escalation): the move's own notice tells the
queue it went to, and the stale one would have told it twice.
"""

import logging
import uuid

from django.conf import settings
from django.urls import reverse
from django.utils import timezone

from approvals import events
from approvals.models import ApprovalRequest
from approvals.notifiers import ESCALATED, PENDING, Notification, get_notifier

logger = logging.getLogger(__name__)

__all__ = ["ESCALATED", "PENDING", "build_notification", "do_send_notification", "notify_on_commit"]


def notify_on_commit(*, event: str, request_ids: list[int]) -> None:
    """Enqueue one notification task per configured notifier and request, after the commit.
    Call once the requests are in the queues the event put them in."""
    paths = list(settings.GATEHOUSE_NOTIFIERS)
    if paths and request_ids:
        queues = dict(ApprovalRequest.objects.filter(pk__in=request_ids).values_list("pk", "queue"))
        routes = [(pk, queues.get(pk)) for pk in request_ids]
        events.on_commit(lambda: _enqueue(event=event, routes=routes, paths=paths))


def _enqueue(*, event: str, routes: list[tuple[int, str | None]], paths: list[str]) -> None:
    from approvals.tasks import notify_task

    for request_id, event_queue in routes:
        delivery_id = uuid.uuid4().hex
        for path in paths:
            task = notify_task.s(path, event, request_id, delivery_id, event_queue=event_queue)
            try:
                (task.set(queue=settings.NOTIFY_QUEUE) if settings.NOTIFY_QUEUE else task).apply_async()
            except Exception:  # one that fails to enqueue must not take the others with it
                logger.exception("could not enqueue %s's %s notice of request %s", path, event, request_id)


def build_notification(
    *, event: str, request_id: int, delivery_id: str, event_queue: str | None = None
) -> Notification | None:
    """The notification for a request, or None when it no longer waits for anyone or has left
    `event_queue`, the queue the event happened in (None: any)."""
    request_ = ApprovalRequest.objects.filter(pk=request_id).first()
    if request_ is None or not request_.is_pending:
        return None
    if event_queue is not None and request_.queue != event_queue:
        return None  # superseded by the notice of the move
    url = settings.GATEHOUSE_BASE_URL.rstrip("/") + reverse("approvals:decision", args=[request_.pk])
    return Notification(
        event=event,
        delivery_id=delivery_id,
        approval={
            "id": request_.pk,
            "thread_id": request_.thread_id,
            "agent": request_.agent,
            "queue": request_.queue,
            "escalated_from": request_.escalated_from,
            "reason": request_.status_reason,
            "action": request_.action,
            "args": request_.args,
            "description": request_.description,
            "url": url,
            "created_at": request_.created_at.isoformat(),
            "expires_at": request_.expires_at.isoformat() if request_.expires_at else None,
        },
        sent_at=timezone.now().isoformat(),
    )


def do_send_notification(
    *, notifier_path: str, event: str, request_id: int, delivery_id: str, event_queue: str | None = None
) -> bool:
    """Send one notification; False when there was nothing to send. Raises when the notifier fails."""
    notification = build_notification(
        event=event, request_id=request_id, delivery_id=delivery_id, event_queue=event_queue
    )
    if notification is None:
        return False
    get_notifier(notifier_path).send(notification)
    return True
