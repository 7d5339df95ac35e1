"""Enforce gates' expiry policies (Celery beat calls do_expire_due): auto-reject or escalate.

Each expiry takes the same locks as a decision (thread, then request), so a reviewer deciding
at the same moment either wins or is told the request expired; every expiry is audited.
"""

from datetime import datetime

from django.db import transaction
from django.utils import timezone

from agents import gates
from approvals import events
from approvals.actions import notify
from approvals.actions.audit import audit_request, request_facts
from approvals.actions.decisions import is_past_expiry, lock_request, supersede
from approvals.actions.errors import ThreadDeleted
from approvals.actions.undo import do_take_effect_now
from approvals.models import ApprovalRequest, ApprovalStatus, ExpiryAction
from approvals.selectors import RequestRoute
from checkpoints.backends.base import ThreadData


def default_reason(after_s: float) -> str:
    return f"No reviewer decided within {describe_duration(after_s)}."


def describe_duration(seconds: float) -> str:
    for unit, size in (("day", 86400), ("hour", 3600), ("minute", 60)):
        if seconds >= size and seconds % size == 0:
            count = int(seconds // size)
            return f"{count} {unit}{'s' if count != 1 else ''}"
    return f"{seconds:g} seconds"


def do_expire_due(*, now: datetime | None = None, limit: int = 200) -> int:
    """Apply the policy of every pending request past its expiry; return how many were handled."""
    now = now or timezone.now()
    due = list(
        ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING, expires_at__lte=now)
        .order_by("expires_at", "id")
        .values_list("pk", "thread_id")[:limit]
    )
    return sum(_expire(request_id, thread_id=thread_id, now=now) for request_id, thread_id in due)


def _expire(request_id: int, *, thread_id: str, now: datetime) -> bool:
    with transaction.atomic():
        try:
            thread, request_ = lock_request(request_id, thread_id=thread_id)
        except ThreadDeleted:
            return False  # deleted since the query: the sweep goes on with the others
        if not is_past_expiry(request_, now=now):
            return False  # decided or escalated since the query
        if thread.head_id != str(request_.checkpoint_id):
            supersede(request_, reason="the thread moved on to a newer checkpoint")
            return False
        if request_.expiry_action == ExpiryAction.ESCALATE:
            _escalate(request_)
        else:
            _auto_reject(request_, thread)
    return True


def _auto_reject(request_: ApprovalRequest, thread: ThreadData) -> None:
    reason = request_.expiry_reason or "No reviewer decided in time."
    request_.status, request_.status_reason = ApprovalStatus.EXPIRED, reason
    request_.decided_at, request_.decision_message = timezone.now(), reason
    request_.claimed_by, request_.claimed_at, request_.claim_active_at = None, None, None
    request_.save()
    do_take_effect_now(request_)
    gates.resume_if_decided(thread=thread, checkpoint_id=str(request_.checkpoint_id), by_person=False)
    # Last: the ledger's lock is held from here to the commit only.
    audit_request(request_, actor=None, action="expiry.reject", data={"reason": reason})
    routes = [RequestRoute.of(request_)]
    events.on_commit(lambda: events.send_requests_closed(requests=routes))


def escalation_reason(request_: ApprovalRequest, *, source: str) -> str:
    return request_.expiry_reason or f"Escalated: nobody in {source} decided in time."


def _escalate(request_: ApprovalRequest) -> None:
    source, target, seen = request_.queue, request_.escalate_to, request_facts(request_)
    reason = escalation_reason(request_, source=source)
    request_.queue, request_.escalated_from, request_.status_reason = target, source, reason
    request_.expires_at = None  # in the new queue it waits for a decision
    request_.claimed_by, request_.claimed_at, request_.claim_active_at = None, None, None
    request_.save()
    audit_request(
        request_, actor=None, action="expiry.escalate", seen=seen, data={"reason": reason, "to": target}
    )
    route = RequestRoute.of(request_)
    events.on_commit(lambda: events.send_request_changed(request=route, queues=[source, target]))
    notify.notify_on_commit(event=notify.ESCALATED, request_ids=[route.pk])
