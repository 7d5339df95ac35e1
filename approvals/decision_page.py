"""The decision page's context: one builder for the page, its htmx answers and its pushes
(approvals.consumers), so a panel pushed later shows what a reload shows."""

import copy
import hashlib
import math
from typing import Any

from django.conf import settings
from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.core.exceptions import ObjectDoesNotExist
from django.utils import timezone

from approvals import selectors
from approvals.access import Access
from approvals.actions.decisions import is_past_expiry
from approvals.actions.signoffs import args_mark, describe_signoffs, needs_signoffs
from approvals.actions.standing import standing_decisions
from approvals.forms import edit_fields
from approvals.models import ApprovalRequest, ApprovalStatus
from checkpoints.models import ThreadStatus

RUNS_THE_CALL = (ApprovalStatus.APPROVED, ApprovalStatus.EDITED)
# A browser fires a timer longer than 2**31 ms (24.8 days) at once: a page waits at most a day,
# then asks again (a panel fetched before the deadline brings the next wait).
DEADLINE_WAIT_MAX_MS = 86_400_000


def decision_context(
    item: ApprovalRequest, *, user: AbstractBaseUser | AnonymousUser, asked_before: str | None = None
) -> dict[str, Any]:
    """The decision page for this user: the one context its page, its htmx answers and its
    pushes render, so a panel pushed later shows what a reload shows. `asked_before`: the page
    of the conversation as asked (selectors.record_context; raises NoSuchMessages)."""
    context: dict[str, Any] = {"item": item, "fields": edit_fields(item), "user": user}
    context.update(selectors.status_context(item, user))
    asked = selectors.asked_checkpoint(item)  # read once: the reasoning and the record both quote it
    context.update(selectors.neighbours(user, item), **selectors.proposal_context(item, asked=asked))
    # The thread now, without the thread page's side list (the decision page does not show it).
    context.update(selectors.thread_context(item.thread_id, side_requests=False))
    context.update(selectors.record_context(item, user, asked=asked, asked_before=asked_before))
    decider = decider_context(item, user=user)
    context.update(decider, undo_s=settings.DECISION_UNDO_S)
    context["can_claim"] = may_claim(context["can_claim"], decider)
    context["panel_mark"] = panel_mark(context)
    context["deadline_wait_ms"] = deadline_wait_ms(item, expired=context["expired"])
    context["item"] = as_it_stands(item)
    return context


def as_it_stands(item: ApprovalRequest) -> ApprovalRequest:
    """The request as its panel proposes it: a pending request whose arguments a reviewer edited
    under the two-person rule waits for approvals of the edited ones, and its Approve is for those
    (the page sends their mark), so they are what it shows, not the ones the edit replaced. A
    copy, for rendering only; the conversation as asked still shows the model's call."""
    if not item.is_pending or item.decision_args is None:
        return item
    shown = copy.copy(item)
    shown.args = item.decision_args
    return shown


def may_claim(can_claim: bool, decider: dict[str, Any]) -> bool:
    """Whether the status line offers to claim the request (`can_claim`: the queue allows it).
    Who already signed off cannot take the request from the reviewers it now waits for. Past its
    deadline the expiry decides it (decisions.check_decision answers 409): no buttons."""
    return can_claim and not decider["signed_off"] and not decider["expired"]


def deadline_wait_ms(item: ApprovalRequest, *, expired: bool) -> int | None:
    """How long a page showing this pending request waits before it fetches its panel again, to
    stop offering the decision at the deadline (a moment after it, so the server agrees)."""
    if expired or not item.is_pending or item.expires_at is None:
        return None
    left_ms = (item.expires_at - timezone.now()).total_seconds() * 1000
    return min(max(math.ceil(left_ms), 0) + 250, DEADLINE_WAIT_MAX_MS)


def decider_context(item: ApprovalRequest, *, user: AbstractBaseUser | AnonymousUser) -> dict[str, Any]:
    """What this user may do about the request now, and what its decision still waits for."""
    held_by = item.claimed_by if item.is_claimed and item.claimed_by_id != user.pk else None
    expired = is_past_expiry(item)
    signed_off = (
        item.is_pending and needs_signoffs(item) and item.signoffs.filter(reviewer_id=user.pk).exists()
    )
    runs = item.status in RUNS_THE_CALL
    thread = item.thread
    return {
        "held_by": held_by,
        "signed_off": signed_off,
        "expired": expired,
        "signoffs": describe_signoffs(item) if signed_off else "",
        # Deciding is refused to everyone but the holder of a claim (check_decision).
        "may_decide": item.is_pending
        and not expired
        and held_by is None
        and Access.of(user).can_decide(item.queue),
        "standing_rules": [
            p for p in standing_decisions(item.thread_id) if p.tool == item.action and p.agent == item.agent
        ]
        if runs
        else [],
        # A paused thread keeps its decisions until an operator resumes it (gates.resume_if_decided).
        "paused": item.is_decided
        and thread.status == ThreadStatus.PAUSED
        and str(thread.head_id) == str(item.checkpoint_id),
    }


def panel_mark(context: dict[str, Any]) -> str:
    """A digest of what the decision panel shows beyond its status line: a push re-renders the
    panel (and loses what the reviewer typed in it) only when this changes."""
    item, held_by = context["item"], context["held_by"]
    parts = (
        item.status,
        item.decided_by_id,
        item.undo_until,
        args_mark(item.effective_args),
        held_by.pk if held_by else None,
        context["signed_off"],
        context["may_decide"],
        context["paused"],
        [(p.pk, p.until) for p in context["standing_rules"]],
        context["expired"],
        # An escalation moves it to another queue: a page that showed it expired at the deadline
        # (its panel fetched then, not pushed) must get the escalated panel, buttons and all.
        item.queue,
        # The request that asks it again is linked after this one closed (gates._link_to_originals):
        # the push after that link must repaint the panel to say "Asked again as".
        replacement(item),
    )
    return hashlib.sha256(repr(parts).encode()).hexdigest()[:16]


def replacement(item: ApprovalRequest) -> tuple[int, str] | None:
    """The request that asks a superseded one again, as its panel shows it (pk, status)."""
    if item.status != ApprovalStatus.SUPERSEDED:
        return None
    try:
        return item.replaced_by.pk, item.replaced_by.status
    except ObjectDoesNotExist:
        return None
