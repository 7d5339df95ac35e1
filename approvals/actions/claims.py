"""Claiming: a reviewer takes a pending request so others see who works on it.

Only the claimer decides a claimed request (others get a 409 naming them). A claim nobody
touches for CLAIM_IDLE_S is released by the beat task; admins reassign or release any claim.
Every change is audited with what the reviewer saw, and pushed to inboxes and the decision page.
"""

from datetime import datetime, timedelta

from django.conf import settings
from django.contrib.auth import get_user_model
from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from agents.actions import InvalidInput
from approvals import events
from approvals.access import Access
from approvals.actions.audit import audit_request
from approvals.actions.decisions import describe_closed, expired_message, is_past_expiry
from approvals.actions.errors import Conflict, NotAllowed, ThreadDeleted
from approvals.actions.locks import lock_request_by_id
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.selectors import RequestRoute

# One answer for "no such user" and "a user who may not decide this queue", so that the
# reassign form cannot be used to find out which usernames exist.
NO_SUCH_REVIEWER = "choose an active reviewer who may decide this queue"


class ClaimConflict(Conflict):
    """Claimed by someone else, or no longer pending. HTTP 409."""


def check_may_claim(request_: ApprovalRequest, *, user: AbstractBaseUser) -> None:
    if not Access.of(user).can_decide(request_.queue):
        raise NotAllowed(f"You may not work on requests in the {request_.queue!r} queue.")


def _locked(request_id: int) -> ApprovalRequest:
    """Lock the request (and its thread); every permission and state check below reads this row."""
    request_ = lock_request_by_id(request_id)[1]
    if not request_.is_pending:
        raise ClaimConflict(describe_closed(request_))
    return request_


def _check_not_expired(request_: ApprovalRequest) -> None:
    # Its expiry decides it now (a release is still fine: the sweep clears claims anyway).
    if is_past_expiry(request_):
        raise ClaimConflict(expired_message(request_))


def _set_claim(request_: ApprovalRequest, user: AbstractBaseUser | None, *, now: datetime) -> None:
    request_.hold_for(user, now=now)
    request_.save(update_fields=["claimed_by", "claimed_at", "claim_active_at"])


def _changed(request_: ApprovalRequest, *, actor: AbstractBaseUser | None, action: str, **data: str) -> None:
    audit_request(request_, actor=actor, action=action, data=data)
    route, queues = RequestRoute.of(request_), [request_.queue]
    events.on_commit(lambda: events.send_request_changed(request=route, queues=queues))


def do_claim(request_id: int, *, user: AbstractBaseUser) -> ApprovalRequest:
    """Claim a pending request (or refresh one's own claim) the user may decide, as it is now."""
    with transaction.atomic():
        request_ = _locked(request_id)
        check_may_claim(request_, user=user)
        _check_not_expired(request_)
        holder = request_.claimed_by
        if holder is not None and holder.pk != user.pk:
            raise ClaimConflict(f"Already claimed by {holder.get_username()}.")
        if request_.signoffs.filter(reviewer_id=user.pk).exists():
            # Their claim would hold it from the other reviewers the two-person rule waits for.
            raise ClaimConflict("You already approved this; another reviewer must take it.")
        if holder is not None:
            do_touch_claim(request_id, user=user)
            return request_
        _set_claim(request_, user, now=timezone.now())
        _changed(request_, actor=user, action="claim.take")
    return request_


def do_release(request_id: int, *, user: AbstractBaseUser) -> ApprovalRequest:
    """Give a claim back to the queue: one's own, or anyone's for an admin."""
    with transaction.atomic():
        request_ = _locked(request_id)
        holder = request_.claimed_by
        if holder is None:
            return request_
        if holder.pk != user.pk and not Access.of(user).can_manage_claims:
            raise NotAllowed(f"Only {holder.get_username()} or an admin can release this claim.")
        _set_claim(request_, None, now=timezone.now())
        _changed(request_, actor=user, action="claim.release", claimed_by=holder.get_username())
    return request_


def do_reassign(request_id: int, *, admin: AbstractBaseUser, to: AbstractBaseUser) -> ApprovalRequest:
    """Hand a request to another reviewer who may decide its queue. Admins only."""
    if not Access.of(admin).can_manage_claims:
        raise NotAllowed("Only admins can reassign requests.")
    with transaction.atomic():
        request_ = _locked(request_id)
        _check_not_expired(request_)
        if not Access.of(to).can_decide(request_.queue):
            raise InvalidInput({"to": NO_SUCH_REVIEWER})
        if request_.signoffs.filter(reviewer_id=to.pk).exists():
            # As in do_claim: their claim would hold it from the reviewers the two-person rule waits for.
            raise ClaimConflict(f"{to.get_username()} already approved this; another reviewer must take it.")
        before = request_.claimed_by.get_username() if request_.claimed_by else ""
        _set_claim(request_, to, now=timezone.now())
        _changed(request_, actor=admin, action="claim.reassign", claimed_by=before, to=to.get_username())
    return request_


def do_claim_op(request_: ApprovalRequest, *, user: AbstractBaseUser, op: str, to: str = "") -> None:
    """Claim, release or (admins) reassign to the user named `to`, as a form or the API asks."""
    if op == "claim":
        do_claim(request_.pk, user=user)
    elif op == "release":
        do_release(request_.pk, user=user)
    elif op == "reassign":
        if not Access.of(user).can_manage_claims:
            raise NotAllowed("Only admins can reassign requests.")
        target = get_user_model().objects.filter(username=to, is_active=True).first()
        if target is None:
            raise InvalidInput({"to": NO_SUCH_REVIEWER})
        do_reassign(request_.pk, admin=user, to=target)
    else:
        raise InvalidInput({"op": "must be claim, release or reassign"})


def do_touch_claim(request_id: int, *, user: AbstractBaseUser) -> None:
    """Record activity on one's own claim, so it does not expire while worked on."""
    ApprovalRequest.objects.filter(
        pk=request_id, claimed_by_id=user.pk, status=ApprovalStatus.PENDING
    ).update(claim_active_at=timezone.now())


def do_release_idle_claims(*, now: datetime | None = None, limit: int = 500) -> int:
    """Release claims idle for longer than CLAIM_IDLE_S; return how many."""
    cutoff = (now or timezone.now()) - timedelta(seconds=settings.CLAIM_IDLE_S)
    ids = ApprovalRequest.objects.filter(
        status=ApprovalStatus.PENDING, claimed_by__isnull=False, claim_active_at__lt=cutoff
    ).values_list("pk", flat=True)[:limit]
    return sum(_release_if_idle(request_id, cutoff=cutoff) for request_id in ids)


def _release_if_idle(request_id: int, *, cutoff: datetime) -> bool:
    with transaction.atomic():
        try:
            request_ = lock_request_by_id(request_id)[1]
        except ThreadDeleted:
            return False  # deleted since the query, with its claim
        active = request_.claim_active_at
        if not request_.is_claimed or request_.claimed_by is None or active is None or active >= cutoff:
            return False  # decided, released or touched since the query
        holder = request_.claimed_by.get_username()
        _set_claim(request_, None, now=timezone.now())
        _changed(
            request_, actor=None, action="claim.expire", claimed_by=holder, idle_since=active.isoformat()
        )
    return True
