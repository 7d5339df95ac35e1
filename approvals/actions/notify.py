"""Tell the configured notifiers about new pending requests and escalations.

Notifications never block a run: they are enqueued after the commit (a broker failure is
logged, not raised) on their own queue (NOTIFY_QUEUE), which the steps' workers do not consume,
and each (notifier, request) is its own Celery task that retries with backoff, so one slow or
failing receiver delays nobody else.

Nothing is lost with the broker: each notice is first an OutboxNotice row, written in the
transaction of its event, claimed by the one try that sends it (status "sending"), and marked
sent (or dropped, or given up) by it. The sweep resends a row still queued after
NOTIFY_RESEND_AFTER_S: its message was lost (Redis restarted empty, or was down at the commit),
or still sending that long: its try died mid-send.

A notification carries the queue its event happened in, and is dropped if the request has moved
on by the time it is sent (a retry outlasting an escalation): the move's own notice tells the
queue it went to, and the stale one would have told it twice.
"""

import logging
import uuid
from datetime import datetime, timedelta

from django.conf import settings
from django.db.models import F, Q
from django.urls import reverse
from django.utils import timezone

from approvals import events
from approvals.models import ApprovalRequest, ApprovalStatus, NoticeStatus, OutboxNotice
from approvals.notifiers import ESCALATED, PENDING, Notification, get_notifier

logger = logging.getLogger(__name__)

__all__ = [
    "ESCALATED",
    "PENDING",
    "build_notification",
    "do_give_up_notice",
    "do_send_notification",
    "do_sweep_notices",
    "notify_on_commit",
]

RESEND_BATCH = 500
FINISHED = (NoticeStatus.SENT, NoticeStatus.DROPPED, NoticeStatus.GAVE_UP)
KEEP_FINISHED = timedelta(days=7)
"""How long a sent, dropped or given-up notice is kept before the sweep deletes it."""


def notify_on_commit(*, event: str, request_ids: list[int]) -> None:
    """Record one notice per configured notifier and request, and enqueue each after the commit.
    Call inside the event's transaction, once the requests are in the queues it put them in."""
    paths = list(settings.GATEHOUSE_NOTIFIERS)
    if not paths or not request_ids:
        return
    queues = dict(ApprovalRequest.objects.filter(pk__in=request_ids).values_list("pk", "queue"))
    now = timezone.now()
    notices = OutboxNotice.objects.bulk_create(
        OutboxNotice(
            request_id=pk,
            notifier=path,
            event=event,
            event_queue=queues[pk],
            delivery_id=uuid.uuid4().hex,
            touched_at=now,
        )
        for pk in request_ids
        if pk in queues
        for path in paths
    )
    events.on_commit(lambda: _enqueue(notices))


def _enqueue(notices: list[OutboxNotice]) -> None:
    for notice in notices:
        try:
            _send_task(notice)
        except Exception:  # one that fails to enqueue must not take the others with it; the sweep resends it
            logger.exception(
                "could not enqueue %s's %s notice of request %s",
                notice.notifier,
                notice.event,
                notice.request_id,
            )


def _send_task(notice: OutboxNotice) -> None:
    from approvals.tasks import notify_task

    task = notify_task.s(
        notice.notifier, notice.event, notice.request_id, notice.delivery_id, event_queue=notice.event_queue
    )
    (task.set(queue=settings.NOTIFY_QUEUE) if settings.NOTIFY_QUEUE else task).apply_async()


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
    """Send one notification and mark its notice; False when there was nothing to send (or it
    was already sent: a resent copy). Raises when the notifier fails."""
    if not _start_try(delivery_id=delivery_id):
        return False
    try:
        notification = build_notification(
            event=event, request_id=request_id, delivery_id=delivery_id, event_queue=event_queue
        )
        if notification is None:
            _finish(delivery_id=delivery_id, status=NoticeStatus.DROPPED)
            return False
        # No transaction or lock is held here: a send may take the receiver's whole timeout.
        get_notifier(notifier_path).send(notification)
    except Exception:
        _release(delivery_id=delivery_id)  # failed, not sent: its retry (or the sweep) claims it again
        raise
    _finish(delivery_id=delivery_id, status=NoticeStatus.SENT)
    return True


def do_give_up_notice(*, delivery_id: str) -> None:
    """Mark the notice given up: its task stops retrying and the sweep leaves it alone."""
    _finish(delivery_id=delivery_id, status=NoticeStatus.GAVE_UP)


def _claimable(*, now: datetime) -> Q:
    """Queued, or claimed by a try that has not finished within NOTIFY_RESEND_AFTER_S: one that
    died mid-send (a send is bounded by the notifier's timeouts, seconds, far below that)."""
    stale = now - timedelta(seconds=settings.NOTIFY_RESEND_AFTER_S)
    return Q(status=NoticeStatus.QUEUED) | Q(status=NoticeStatus.SENDING, touched_at__lte=stale)


def _start_try(*, delivery_id: str) -> bool:
    """Claim the notice for this try and count it; False when it is finished or another try is
    sending it (a resent copy run meanwhile): at most one try sends at a time. The claim is one
    atomic UPDATE, so two copies racing for it cannot both win, and no lock is held during the
    send. A task enqueued before the outbox existed has no row, and is tried as it was."""
    now = timezone.now()
    notices = OutboxNotice.objects.filter(delivery_id=delivery_id)
    if notices.filter(_claimable(now=now)).update(
        status=NoticeStatus.SENDING, touched_at=now, tries=F("tries") + 1
    ):
        return True
    return not notices.exists()


def _release(*, delivery_id: str) -> None:
    OutboxNotice.objects.filter(delivery_id=delivery_id, status=NoticeStatus.SENDING).update(
        status=NoticeStatus.QUEUED, touched_at=timezone.now()
    )


def _finish(*, delivery_id: str, status: NoticeStatus) -> None:
    OutboxNotice.objects.filter(
        delivery_id=delivery_id, status__in=(NoticeStatus.QUEUED, NoticeStatus.SENDING)
    ).update(status=status, finished_at=timezone.now())


def do_sweep_notices(*, now: datetime | None = None) -> int:
    """Resend notices still queued NOTIFY_RESEND_AFTER_S after they were last enqueued or tried,
    and delete those finished KEEP_FINISHED ago. Returns how many were resent.

    A live notice is touched at least every retry countdown (at most half the broker's
    visibility_timeout), and Redis itself redelivers an unacknowledged one after visibility_timeout,
    so a row this old is almost always one whose message was lost, or one claimed by a try that
    died mid-send. When it was not (a long backlog) the copy is harmless: a try claims the notice
    before sending, so a copy run while another try sends it, or after it was sent, is skipped."""
    now = now or timezone.now()
    due = OutboxNotice.objects.filter(
        status__in=(NoticeStatus.QUEUED, NoticeStatus.SENDING),
        touched_at__lte=now - timedelta(seconds=settings.NOTIFY_RESEND_AFTER_S),
    )
    # Nothing to tell: the request no longer waits, or its notifier is no longer configured.
    due.filter(
        ~Q(request__status=ApprovalStatus.PENDING) | ~Q(notifier__in=settings.GATEHOUSE_NOTIFIERS)
    ).update(status=NoticeStatus.DROPPED, finished_at=now)
    resent = _resend(list(due.order_by("touched_at", "id")[:RESEND_BATCH]), now=now)
    OutboxNotice.objects.filter(status__in=FINISHED, finished_at__lte=now - KEEP_FINISHED).delete()
    return resent


def _resend(notices: list[OutboxNotice], *, now: datetime) -> int:
    resent: list[int] = []
    for notice in notices:
        try:
            _send_task(notice)
        except Exception as exc:  # the broker is still down: the rest wait for the next sweep
            logger.warning(
                "could not resend %s unsent notices (%s); retrying at the next sweep",
                len(notices) - len(resent),
                exc,
            )
            break
        resent.append(notice.pk)
    # Back to queued, so the copy may claim one whose try died mid-send; unless a try claimed it
    # since it was read (touched later), whose claim stands.
    OutboxNotice.objects.filter(
        pk__in=resent, touched_at__lte=now - timedelta(seconds=settings.NOTIFY_RESEND_AFTER_S)
    ).update(status=NoticeStatus.QUEUED, touched_at=now)
    if resent:
        logger.warning(
            "resent %s notices still unsent after %s s", len(resent), settings.NOTIFY_RESEND_AFTER_S
        )
    return len(resent)
