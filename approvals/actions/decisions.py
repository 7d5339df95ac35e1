"""Decide approval requests: exactly one decision wins, and the thread resumes exactly once."""

from dataclasses import dataclass
from datetime import datetime
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from agents.actions import InvalidInput
from agents.registry import UnknownAgent, registry
from agents.tools import Decision, ToolArgumentsError
from approvals import events, rows
from approvals.access import Access
from approvals.actions.audit import appended_last, audit_request, request_facts
from approvals.actions.errors import Conflict, NotAllowed
from approvals.actions.locks import lock_request
from approvals.actions.signoffs import args_mark, check_args_seen, do_signoff, needs_signoffs
from approvals.actions.undo import do_schedule_effect, do_take_effect_now, undo_deadline
from approvals.models import ApprovalRequest, ApprovalStatus, ExpiryAction, PolicyAction
from approvals.policies import Rule
from approvals.selectors import RequestRoute

__all__ = [
    "DecisionConflict",
    "NotAllowed",
    "access_request",
    "check_decision",
    "check_may_decide",
    "do_decide",
    "do_decide_by_policy",
    "expired_message",
    "is_past_expiry",
    "lock_request",
]

STATUS_FOR = {
    Decision.APPROVE: ApprovalStatus.APPROVED,
    Decision.EDIT: ApprovalStatus.EDITED,
    Decision.REJECT: ApprovalStatus.REJECTED,
    Decision.RESPOND: ApprovalStatus.RESPONDED,
}
MAX_MESSAGE_CHARS = 5000


class DecisionConflict(Conflict):
    """The request can no longer be decided (decided elsewhere, superseded, claimed). HTTP 409."""

    def __init__(self, request_: ApprovalRequest, message: str = "") -> None:
        super().__init__(message or describe_closed(request_))
        self.request = request_


def describe_closed(request_: ApprovalRequest, *, viewer: AbstractBaseUser | None = None) -> str:
    """Say, for a reviewer, why a request is no longer pending."""
    if request_.status == ApprovalStatus.SUPERSEDED:
        return f"This request is no longer current: {request_.status_reason or 'the thread moved on'}."
    if request_.status == ApprovalStatus.EXPIRED:
        return f"Nobody decided this in time; it was rejected automatically: {request_.status_reason}"
    if request_.decided_by is None and request_.policy_name:
        return f"This request was {request_.status} automatically by policy {request_.policy_label}."
    if request_.decided_by is None:
        return f"This request is {request_.status}."
    verb = {
        "approved": "approved",
        "edited": "edited and approved",
        "rejected": "rejected",
        "responded": "responded to",
    }.get(request_.status, request_.status)
    if viewer is not None and viewer.pk == request_.decided_by.pk:
        return f"You {verb} this request."
    return f"Already {verb} by {request_.decided_by.get_username()}."


def is_past_expiry(request_: ApprovalRequest, *, now: datetime | None = None) -> bool:
    """Pending past its deadline: its expiry (a rejection, an escalation) decides it, not a
    reviewer of its queue who acts before the sweep (every INBOX_SWEEP_INTERVAL_S) gets to it."""
    deadline = request_.expires_at
    return request_.is_pending and deadline is not None and deadline <= (now or timezone.now())


def expired_message(request_: ApprovalRequest) -> str:
    then = (
        f"escalated to {request_.escalate_to}"
        if request_.expiry_action == ExpiryAction.ESCALATE
        else "rejected automatically"
    )
    return f"This request expired: nobody decided it in time, and it is being {then}. Nothing was changed."


@dataclass(frozen=True)
class ValidDecision:
    decision: Decision
    args: dict[str, Any] | None
    message: str
    args_seen: str | None = None
    """The page's mark of the arguments its reviewer approves (signoffs.args_mark), if it sent one."""


def access_request(*, user: AbstractBaseUser, request_id: int) -> ApprovalRequest:
    """Fetch a request the user may see, or raise ApprovalRequest.DoesNotExist."""
    request_ = rows.request_with(request_id, related=("decided_by", "thread"))
    if request_ is None or not Access.of(user).can_see_queue(request_.queue):
        raise ApprovalRequest.DoesNotExist
    return request_


def check_may_decide(request_: ApprovalRequest, *, user: AbstractBaseUser) -> None:
    if not Access.of(user).can_decide(request_.queue):
        raise NotAllowed(f"You may not decide requests in the {request_.queue!r} queue.")


def check_decision(
    request_: ApprovalRequest, *, user: AbstractBaseUser, decision: str, args: Any = None, message: str = ""
) -> ValidDecision:
    """Validate a decision against the request's allowed decisions and the tool's schema.
    do_decide checks the permission again on the locked row (an escalation may move it)."""
    check_may_decide(request_, user=user)
    # Said before anything about the input: a late or taken request's form mistakes do not matter.
    if not request_.is_pending:
        raise DecisionConflict(request_)
    if is_past_expiry(request_):
        raise DecisionConflict(request_, expired_message(request_))
    if request_.is_claimed and request_.claimed_by_id != user.pk:
        raise DecisionConflict(request_, claimed_message(request_))
    if decision not in request_.allowed_decisions:
        allowed = ", ".join(request_.allowed_decisions)
        raise InvalidInput({"decision": f"{decision!r} is not allowed here; choose one of: {allowed}"})
    if args is not None and decision != Decision.EDIT:
        # Ignoring them would run the call as proposed while the reviewer meant to change it.
        raise InvalidInput(
            {"args": f"arguments are only for an edit; {decision!r} runs or answers the call as proposed"}
        )
    message = (message or "").strip()
    if len(message) > MAX_MESSAGE_CHARS:
        raise InvalidInput({"message": f"is {len(message)} characters; the limit is {MAX_MESSAGE_CHARS}"})
    if decision in (Decision.REJECT, Decision.RESPOND) and not message:
        what = "a reason for the agent" if decision == Decision.REJECT else "the text to give the agent"
        raise InvalidInput({"message": f"write {what}"})
    valid_args = None
    if decision == Decision.EDIT:
        try:
            valid_args = registry.get(request_.agent).validate_edit(request_.action, args)
        except ToolArgumentsError as exc:
            raise InvalidInput(
                {f"args.{k}" if k != "__all__" else "args": v for k, v in exc.errors.items()}
            ) from exc
        except UnknownAgent as exc:  # renamed or removed in a deploy: nothing can check the edit
            raise InvalidInput(
                {"args": f"this thread's agent {request_.agent!r} is not registered in this deployment"}
            ) from exc
    return ValidDecision(decision=Decision(decision), args=valid_args, message=message)


def do_decide(seen: ApprovalRequest, *, reviewer: AbstractBaseUser, valid: ValidDecision) -> ApprovalRequest:
    """Store the decision on the request the reviewer saw, as it is once locked; resume the thread
    when it was the last open one. Raise NotAllowed if the reviewer may not decide the request's
    queue as it is now, DecisionConflict if someone else decided first or the thread moved on."""
    # The ledger's events (a sign-off's, the decision's) are the transaction's last statements.
    with transaction.atomic(), appended_last():
        # Lock order everywhere: thread, then its requests (operators' edits take the same path).
        thread, request_ = lock_request(seen.pk, thread_id=seen.thread_id)
        check_may_decide(request_, user=reviewer)
        if request_.is_pending and thread.head_id != str(request_.checkpoint_id):
            # Committed, not rolled back: the next reviewer sees why at once.
            supersede(request_, reason="the thread moved on to a newer checkpoint")
        if is_past_expiry(request_):  # on the locked row: the deadline may have passed since the check
            raise DecisionConflict(request_, expired_message(request_))
        if request_.is_claimed and request_.claimed_by_id != reviewer.pk:
            raise DecisionConflict(request_, claimed_message(request_))
        if request_.is_pending and valid.decision == Decision.APPROVE:
            # Only for the arguments the reviewer read: another's edit since replaced them, or
            # the client approved arguments it never read (the API's approved_args).
            check_args_seen(request_, seen_mark=valid.args_seen or args_mark(seen.effective_args))
        if request_.is_pending and valid.decision == Decision.EDIT and valid.args is not None:
            # An edit is a new proposal: the policies the gate tried on the model's are tried on it.
            from approvals.actions.policy_gates import edit_refusal  # it imports this module

            if refusal := edit_refusal(request_, args=valid.args, may_decide=Access.of(reviewer).can_decide):
                raise InvalidInput({"args": refusal})
        # What the reviewer was shown, before a sign-off's edit or the decision changes it.
        shown = request_facts(request_)
        if (
            request_.is_pending
            and needs_signoffs(request_)
            and valid.decision in (Decision.APPROVE, Decision.EDIT)
        ):
            if not do_signoff(request_, reviewer=reviewer, edited_args=valid.args, seen=shown):
                return request_  # waits for more approvals
            # Enough different reviewers approved the arguments as they stand (the last edit's).
            valid = ValidDecision(
                decision=Decision.EDIT if request_.decision_args is not None else Decision.APPROVE,
                args=request_.decision_args,
                message=valid.message,
            )
        if request_.is_pending:
            facts = _apply(request_, reviewer=reviewer, valid=valid, undo_until=undo_deadline())
            # Recorded for the runtime, and the thread resumed, now or after the undo window.
            do_schedule_effect(request_, thread=thread)
            _audit_decision(request_, reviewer=reviewer, valid=valid, facts=facts, seen=shown)
            return request_
    raise DecisionConflict(request_)


def claimed_message(request_: ApprovalRequest) -> str:
    name = request_.claimed_by.get_username() if request_.claimed_by else "someone"
    return f"Claimed by {name}: ask them to release it, or an admin to reassign it."


def do_decide_by_policy(request_: ApprovalRequest, *, rule: Rule) -> None:
    """Approve or deny a just-opened request as its matching policy says, through the same path
    as a reviewer's decision but with no undo window. Call inside the step's transaction with the
    thread locked; the caller resumes the thread once every gate at the checkpoint is settled."""
    approve = rule.action == PolicyAction.APPROVE
    default = "Approved by policy" if approve else "Denied by policy"
    valid = ValidDecision(
        decision=Decision.APPROVE if approve else Decision.REJECT,
        args=None,
        message=rule.message or f"{default} {rule.label}.",
    )
    facts = _apply(request_, reviewer=None, valid=valid, rule=rule)
    do_take_effect_now(request_)
    _audit_decision(request_, reviewer=None, valid=valid, facts=facts)


def _apply(
    request_: ApprovalRequest,
    *,
    reviewer: AbstractBaseUser | None,
    valid: ValidDecision,
    rule: Rule | None = None,
    undo_until: datetime | None = None,
) -> dict[str, Any]:
    """Store the decision on the request; return the facts its ledger event records."""
    request_.status = STATUS_FOR[valid.decision]
    request_.undo_until = undo_until
    request_.decided_by = reviewer  # type: ignore[assignment]
    request_.decided_at = timezone.now()
    request_.decision_args = valid.args
    request_.decision_message = valid.message
    request_.claimed_by, request_.claimed_at, request_.claim_active_at = None, None, None
    fields = [
        *("status", "decided_by", "decided_at", "decision_args", "decision_message"),
        *("claimed_by", "claimed_at", "claim_active_at", "undo_until"),
    ]
    facts: dict[str, Any] = {"args": valid.args, "message": valid.message}
    if rule is not None:
        request_.policy_id, request_.policy_name, request_.policy_version = rule.id, rule.name, rule.version
        fields += ["policy", "policy_name", "policy_version"]
        facts["policy"] = {"id": rule.id, "name": rule.name, "version": rule.version}
    request_.save(update_fields=fields)
    routes = [RequestRoute.of(request_)]
    events.on_commit(lambda: events.send_requests_closed(requests=routes))
    return facts


def _audit_decision(
    request_: ApprovalRequest,
    *,
    reviewer: AbstractBaseUser | None,
    valid: ValidDecision,
    facts: dict[str, Any],
    seen: dict[str, Any] | None = None,
) -> None:
    # The decision's last statement: the ledger's lock, which orders every append, is then held
    # for this statement and the commit, not while the decision resumes its thread (decisions
    # arriving together queued on it for about 100 ms each under bench_load).
    audit_request(request_, actor=reviewer, action=f"decision.{valid.decision}", data=facts, seen=seen)


def supersede(request_: ApprovalRequest, *, reason: str) -> None:
    request_.status = ApprovalStatus.SUPERSEDED
    request_.status_reason = reason
    request_.save(update_fields=["status", "status_reason"])
    routes = [RequestRoute.of(request_)]
    events.on_commit(lambda: events.send_requests_closed(requests=routes))
