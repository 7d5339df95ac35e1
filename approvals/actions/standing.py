"""Standing decisions: a reviewer approves a tool (or its exact arguments) for the rest of a
thread, optionally until a time. Each is a policy scoped to the thread, created and revoked
through the policy actions, so both are in the ledger with the diff."""

import json
from datetime import datetime, timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.db.models import QuerySet
from django.utils import timezone

from agents.actions import InvalidInput
from agents.registry import UnknownAgent, registry
from approvals.access import Access
from approvals.actions.decisions import check_may_decide
from approvals.actions.errors import NotAllowed, ThreadDeleted
from approvals.actions.policies import do_create_policy, do_delete_policy
from approvals.actions.signoffs import needs_signoffs
from approvals.models import ApprovalRequest, Policy, PolicyAction
from approvals.policies import MAX_WHEN_CHARS, condition_error
from checkpoints.backends import get_backend
from checkpoints.backends.base import ThreadNotFound

SCOPES = {"tool": "this tool", "args": "these exact arguments"}
# Standing decisions are tried after every other policy whatever its order (Rule.precedence);
# this orders them among themselves, and reads as "last" in lists.
STANDING_ORDER = 1_000_000
LONGEST = timedelta(days=90)


def parse_until(text: str) -> datetime | None:
    """A form's `until` (`YYYY-MM-DDTHH:MM`, the server's time zone), or None when blank."""
    text = text.strip()
    if not text:
        return None
    try:
        moment = datetime.fromisoformat(text)
    except ValueError as exc:
        raise InvalidInput({"until": "write a date and time such as 2026-12-31T17:00"}) from exc
    return moment if timezone.is_aware(moment) else timezone.make_aware(moment)


def standing_condition(*, scope: str, args: dict[str, Any]) -> str:
    """The CEL condition of a standing decision: `true`, or `args == {…}` (JSON is a CEL literal)."""
    if scope == "tool":
        return "true"
    return "args == " + json.dumps(args, ensure_ascii=False, sort_keys=True, allow_nan=False)


def check_standing(
    request_: ApprovalRequest, *, user: AbstractBaseUser, scope: str, until: datetime | None
) -> str:
    """Raise NotAllowed / InvalidInput unless the user may approve the request's tool (or
    arguments) for the rest of its thread; return the condition."""
    check_may_decide(request_, user=user)
    check_may_decide_later_calls(request_, user=user)
    if needs_signoffs(request_):
        raise NotAllowed(
            f"This request needs {request_.required_approvals} approvals: "
            "one reviewer cannot approve such calls for the rest of the thread."
        )
    if scope not in SCOPES:
        raise InvalidInput({"standing": f"choose one of: {', '.join(SCOPES)}"})
    now = timezone.now()
    if until is not None and not now < until <= now + LONGEST:
        raise InvalidInput({"until": f"must be in the future and within {LONGEST.days} days"})
    try:
        when = standing_condition(scope=scope, args=request_.args)
    except ValueError as exc:
        raise InvalidInput(
            {"standing": "these arguments cannot be matched exactly; approve the tool"}
        ) from exc
    if len(when) > MAX_WHEN_CHARS or condition_error(when):
        raise InvalidInput({"standing": "these arguments are too large to match exactly; approve the tool"})
    return when


def check_may_decide_later_calls(request_: ApprovalRequest, *, user: AbstractBaseUser) -> None:
    """The tool's later calls on the thread open in the queue its gate names (a standing decision
    decides only calls no route moved), which may not be this request's: a route or an escalation
    brought it to a queue whose reviewers may be unable to decide that one."""
    try:
        approval = registry.get(request_.agent).approval_for(request_.action)
    except UnknownAgent:
        approval = None
    if approval is None:  # retired since: no later call of it can be matched to a queue
        raise NotAllowed(f"{request_.action!r} is no longer gated here: approve this request alone.")
    if not Access.of(user).can_decide(approval.queue):
        raise NotAllowed(
            f"Later calls of {request_.action} go to the {approval.queue!r} queue, which you may not "
            "decide: approve this request alone."
        )


def do_create_standing(
    request_: ApprovalRequest, *, reviewer: AbstractBaseUser, scope: str, when: str, until: datetime | None
) -> Policy:
    """Save the standing approval (a thread-scoped `approve` policy); audited as policy.create.
    ThreadDeleted if an admin deleted the thread since the approval (which went with it)."""
    who = reviewer.get_username()
    with transaction.atomic():
        try:
            # Held to the commit: a deletion deletes the thread's standing decisions, so one
            # saved beside it would outlive its thread, in no thread's list and no ledger entry.
            get_backend().hold_thread(thread_id=request_.thread_id)
        except ThreadNotFound as exc:
            raise ThreadDeleted from exc
        return do_create_policy(
            actor=reviewer,
            fields={
                "name": f"standing approval of {SCOPES[scope]} by {who}"[:100],
                "agent": request_.agent,
                "tool": request_.action,
                "when": when,
                "action": PolicyAction.APPROVE,
                "message": f"{who} approved {SCOPES[scope]} for the rest of the thread.",
                "order": STANDING_ORDER,
                "thread_id": request_.thread_id,
                "until": until,
            },
        )


def access_standing(*, user: AbstractBaseUser, thread_id: str, policy_id: int) -> Policy:
    """The thread's standing decision a reviewer may revoke, or raise Policy.DoesNotExist. Only
    an approval: an admin's deny, route or require scoped to the thread is no reviewer's to lift."""
    if not Access.of(user).can_revoke_standing:
        raise NotAllowed("Only reviewers and admins revoke standing decisions.")
    return _standing().get(pk=policy_id, thread_id=thread_id)


def do_revoke_standing(policy: Policy, *, actor: AbstractBaseUser) -> None:
    """Delete the standing decision; the ledger keeps it (policy.delete with what it was)."""
    do_delete_policy(policy.pk, actor=actor)


def do_delete_standing_decisions(thread_id: str, *, actor: AbstractBaseUser) -> list[int]:
    """Delete every decision standing on the thread (its id may be used again, by a new thread
    nobody reviewed); each is audited as policy.delete and writes a new policies' generation
    in this transaction. Return their ids. Call in the transaction that deletes the thread, with it locked."""
    ids = list(
        Policy.objects.select_for_update()
        .exclude(thread_id="")
        .filter(thread_id=thread_id)
        .order_by("pk")
        .values_list("pk", flat=True)
    )
    for policy_id in ids:
        do_delete_policy(policy_id, actor=actor)
    return ids


def _standing() -> QuerySet[Policy]:
    """Standing decisions: `approve` policies scoped to a thread (what a reviewer's "Approve, and
    keep approving" makes; revoking one only makes its thread stricter)."""
    return Policy.objects.exclude(thread_id="").filter(action=PolicyAction.APPROVE)


def standing_decisions(thread_id: str) -> list[Policy]:
    """The thread's standing decisions in force, newest first."""
    now = timezone.now()
    rows = _standing().filter(thread_id=thread_id, enabled=True).select_related("created_by")
    return [p for p in rows.order_by("-created_at", "-id") if p.until is None or p.until > now]
