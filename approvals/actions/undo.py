"""The undo window: a decision is stored at once but takes effect (is recorded for the runtime,
and resumes the thread) only after DECISION_UNDO_S. Until then its reviewer may undo it.

Both sides take the thread's row lock, then the requests': an undo at the last moment and the
delayed take-effect serialize, and whichever commits first wins. The runtime reads decisions
only from the checkpoint store, where a decision is written when it takes effect, so a gated
tool can never run on a decision that was undone.
"""

import logging
from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from agents import gates
from agents.gates import HumanDecision
from agents.tools import Decision
from approvals import events
from approvals.access import Access
from approvals.actions.audit import audit_request, request_facts
from approvals.actions.errors import Conflict, NotAllowed
from approvals.actions.locks import lock_request_by_id
from approvals.models import DECIDED, ApprovalRequest, ApprovalStatus
from approvals.selectors import RequestRoute
from checkpoints.backends import get_backend
from checkpoints.backends.base import ThreadData, ThreadNotFound

log = logging.getLogger(__name__)

UNDO_GRACE_S = 60  # an undone request's least time left before its expiry acts


class TooLateToUndo(Conflict):
    """The decision already took effect, or the request was never decided. HTTP 409."""


def undo_deadline() -> datetime | None:
    """Until when a decision stored now may be undone; None when there is no window."""
    window = float(settings.DECISION_UNDO_S)
    return timezone.now() + timedelta(seconds=window) if window > 0 else None


def do_schedule_effect(request_: ApprovalRequest, *, thread: ThreadData) -> None:
    """Make a just-stored decision take effect now (stored with no undo_until) or once its window
    has passed. Call inside the deciding transaction, with the thread and the request locked."""
    if request_.undo_until is None:
        _record(request_, decision=decision_of(request_))
        gates.resume_if_decided(thread=thread, checkpoint_id=str(request_.checkpoint_id), by_person=True)
        return
    _take_effect_later(checkpoint_id=str(request_.checkpoint_id), at=request_.undo_until)


KIND_FOR = {
    ApprovalStatus.APPROVED: Decision.APPROVE,
    ApprovalStatus.EDITED: Decision.EDIT,
    ApprovalStatus.REJECTED: Decision.REJECT,
    ApprovalStatus.RESPONDED: Decision.RESPOND,
    ApprovalStatus.EXPIRED: Decision.REJECT,
}


def decision_of(request_: ApprovalRequest) -> HumanDecision:
    """The decided request as the agent receives it (agents.gates)."""
    expired = request_.status == ApprovalStatus.EXPIRED
    return HumanDecision(
        kind=KIND_FOR[ApprovalStatus(request_.status)],
        args=request_.decision_args,
        message=request_.decision_message,
        reviewer=request_.decided_by.get_username() if request_.decided_by else "",
        expired=expired,
        policy=request_.policy_label if request_.decided_by is None and request_.policy_name else "",
    )


def do_take_effect_now(request_: ApprovalRequest) -> None:
    """Record an automatic decision for the runtime at once: a policy's decision has no undo
    window. Call inside the deciding transaction with the thread locked; the caller resumes."""
    _record(request_, decision=decision_of(request_))


def do_take_effect(*, checkpoint_id: str) -> int:
    """Record every decision at the checkpoint whose undo window has passed, and resume the
    thread when nothing there is left open. Return how many took effect."""
    thread_id = (
        ApprovalRequest.objects.filter(checkpoint_id=checkpoint_id)
        .values_list("thread_id", flat=True)
        .first()
    )
    if thread_id is None:
        return 0
    with transaction.atomic():
        try:
            thread = get_backend().lock_thread(thread_id=thread_id)
        except ThreadNotFound:
            return 0  # deleted since the query, with its decisions: nothing is left to resume
        requests = list(
            ApprovalRequest.objects.select_for_update(of=("self",))
            .select_related("decided_by")
            .filter(checkpoint_id=checkpoint_id, status__in=DECIDED, undo_until__isnull=False)
        )
        now, due = timezone.now(), 0
        for request_ in requests:
            if request_.undo_until and request_.undo_until > now:  # early (clocks): try again then
                _take_effect_later(checkpoint_id=checkpoint_id, at=request_.undo_until)
                continue
            _record(request_, decision=decision_of(request_))
            due += 1
        if due:
            gates.resume_if_decided(thread=thread, checkpoint_id=checkpoint_id, by_person=True)
    return due


def do_take_effect_due() -> int:
    """The sweep's backstop (a delayed task lost with Redis): decisions past their window."""
    checkpoints = set(
        ApprovalRequest.objects.filter(
            status__in=DECIDED, undo_until__isnull=False, undo_until__lte=timezone.now()
        ).values_list("checkpoint_id", flat=True)[:500]
    )
    return sum(do_take_effect(checkpoint_id=str(c)) for c in checkpoints)


def do_undo(request_id: int, *, user: AbstractBaseUser) -> ApprovalRequest:
    """Return a decided request to pending, claimed by the user, while its undo window is open;
    audit it."""
    with transaction.atomic():
        request_ = lock_request_by_id(request_id)[1]
        if (
            request_.status not in DECIDED
            or request_.undo_until is None
            or request_.undo_until <= timezone.now()
        ):
            raise TooLateToUndo("Nothing to undo: no decision here is inside its undo window.")
        access = Access.of(user)
        if request_.decided_by_id != user.pk and not access.can_manage_claims:
            raise NotAllowed("Only the reviewer who decided this (or an admin) can undo it.")
        if not access.can_decide(request_.queue):  # their role or the queue's team, lost since
            raise NotAllowed(f"You may no longer decide requests in the {request_.queue!r} queue.")
        seen = request_facts(request_)
        undone = {"undone": request_.status, "args": request_.decision_args}
        # Under the two-person rule the count restarts: the arguments approved may have been an edit.
        request_.signoffs.all().delete()
        if request_.expires_at is not None and request_.decided_at is not None:
            # The expiry clock stood still while the decision did: it runs on with what was left
            # then (at least a minute), not from a deadline that may have passed meanwhile.
            left = max(request_.expires_at - request_.decided_at, timedelta(seconds=UNDO_GRACE_S))
            request_.expires_at = timezone.now() + left
        request_.status, request_.undo_until = ApprovalStatus.PENDING, None
        request_.decided_by, request_.decided_at = None, None
        request_.decision_args, request_.decision_message = None, ""
        _claim_for(request_, user=user)
        undone["claimed_by"] = request_.claimed_by.get_username() if request_.claimed_by else ""
        request_.save()
        audit_request(request_, actor=user, action="decision.undo", seen=seen, data=undone)
        routes = [RequestRoute.of(request_)]
        # One inbox event lists it again in every inbox; the page event re-renders its page.
        events.on_commit(lambda: events.send_requests_closed(requests=routes))
    return request_


def _claim_for(request_: ApprovalRequest, *, user: AbstractBaseUser) -> None:
    """Hand the undone request to whoever undid it: they are mid-decision, and deciding cleared
    the claim. Someone who may not decide its queue leaves it unclaimed."""
    request_.hold_for(user if Access.of(user).can_decide(request_.queue) else None, now=timezone.now())


def _record(request_: ApprovalRequest, *, decision: HumanDecision) -> None:
    gates.record_decision(
        thread_id=request_.thread_id,
        checkpoint_id=str(request_.checkpoint_id),
        key=request_.key,
        decision=decision,
    )
    if request_.undo_until is not None:
        request_.undo_until = None
        request_.save(update_fields=["undo_until"])


def _take_effect_later(*, checkpoint_id: str, at: datetime) -> None:
    """Run take_effect_task for the checkpoint at `at` (a request's stored undo_until)."""
    from approvals.tasks import take_effect_task

    def enqueue() -> None:
        try:
            task = take_effect_task.s(checkpoint_id)
            if settings.RESUME_QUEUE:  # a person's decision: ahead of new threads' steps
                task = task.set(queue=settings.RESUME_QUEUE)
            task.apply_async(eta=at)
        except Exception as exc:  # the sweep takes over
            log.warning("could not schedule decisions at %s (%s); the sweep will", checkpoint_id, exc)

    transaction.on_commit(enqueue)
