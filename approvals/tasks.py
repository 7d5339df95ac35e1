"""Celery tasks for the inbox: thin, take ids, call actions. Beat runs the sweeps."""

import logging
import random

from celery import Task, shared_task
from django.conf import settings
from django.core.exceptions import ImproperlyConfigured

from approvals.actions.claims import do_release_idle_claims
from approvals.actions.expiry import do_expire_due
from approvals.actions.notify import do_give_up_notice, do_send_notification, do_sweep_notices
from approvals.actions.undo import do_take_effect, do_take_effect_due
from approvals.checks import notify_retry_cap_s

log = logging.getLogger(__name__)


@shared_task
def expire_requests_task() -> int:
    """Auto-reject or escalate pending requests past their gate's expiry."""
    return do_expire_due()


@shared_task(acks_late=True)
def take_effect_task(checkpoint_id: str) -> int:
    """Let decisions at a checkpoint take effect once their undo window has passed."""
    return do_take_effect(checkpoint_id=checkpoint_id)


@shared_task
def take_effect_due_task() -> int:
    """The sweep: decisions past their undo window whose delayed task was lost."""
    return do_take_effect_due()


@shared_task
def release_idle_claims_task() -> int:
    """Give claims nobody touched for CLAIM_IDLE_S back to their queue."""
    return do_release_idle_claims()


@shared_task
def sweep_notices_task() -> int:
    """Resend notifications whose task was lost with the broker; delete old finished ones."""
    return do_sweep_notices()


def backoff_s(retries: int) -> float:
    """Exponential with jitter (±20%): base, 2 x base, 4 x base ... capped at half the broker's
    visibility_timeout (at most ten minutes), so no retry is delivered twice."""
    return min(settings.NOTIFY_RETRY_BASE_S * 2**retries * random.uniform(0.8, 1.2), notify_retry_cap_s())


@shared_task(bind=True, acks_late=True, max_retries=None)
def notify_task(
    self: Task,
    notifier_path: str,
    event: str,
    request_id: int,
    delivery_id: str,
    event_queue: str | None = None,
) -> bool:
    """Send one notification of an event in `event_queue` (None, from a task enqueued before it
    was passed: whichever queue the request is in now)."""
    try:
        return do_send_notification(
            notifier_path=notifier_path,
            event=event,
            request_id=request_id,
            delivery_id=delivery_id,
            event_queue=event_queue,
        )
    except ImproperlyConfigured:
        log.exception("notifier %s is misconfigured; not retrying", notifier_path)
        do_give_up_notice(delivery_id=delivery_id)
        return False
    except Exception as exc:
        if self.request.retries >= settings.NOTIFY_MAX_RETRIES:
            tries = self.request.retries + 1
            log.exception("giving up on %s for request %s after %s tries", notifier_path, request_id, tries)
            do_give_up_notice(delivery_id=delivery_id)
            return False
        log.warning("notifier %s failed (%s); retrying", notifier_path, exc)
        raise self.retry(exc=exc, countdown=backoff_s(self.request.retries)) from exc
