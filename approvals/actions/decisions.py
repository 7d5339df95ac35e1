"""Decide approval requests: exactly one decision wins, and the thread resumes exactly once."""

from dataclasses import dataclass
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db import transaction
from django.utils import timezone

from agents.actions import InvalidInput, do_record_decision, do_resume_after_gates
from agents.prebuilt import ToolAgent
from agents.registry import registry
from agents.tools import Decision, ToolArgumentsError
from approvals import events, permissions
from approvals.actions.audit import do_audit, request_facts
from approvals.actions.errors import Conflict, NotAllowed
from approvals.models import ApprovalRequest, ApprovalStatus
from checkpoints.backends import get_backend
from checkpoints.models import ThreadStatus

__all__ = ["DecisionConflict", "NotAllowed", "access_request", "check_decision", "do_decide"]

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


@dataclass(frozen=True)
class ValidDecision:
    decision: Decision
    args: dict[str, Any] | None
    message: str


def access_request(*, user: AbstractBaseUser, request_id: int) -> ApprovalRequest:
    """Fetch a request the user may see, or raise ApprovalRequest.DoesNotExist."""
    request_ = ApprovalRequest.objects.select_related("decided_by", "thread").get(pk=request_id)
    if not permissions.can_see_queue(user, request_.queue):
        raise ApprovalRequest.DoesNotExist
    return request_


def check_decision(
    request_: ApprovalRequest, *, user: AbstractBaseUser, decision: str, args: Any = None, message: str = ""
) -> ValidDecision:
    """Validate a decision against the request's allowed decisions and the tool's schema."""
    if not permissions.can_decide(user, request_.queue):
        raise NotAllowed(f"You may not decide requests in the {request_.queue!r} queue.")
    if decision not in request_.allowed_decisions:
        allowed = ", ".join(request_.allowed_decisions)
        raise InvalidInput({"decision": f"{decision!r} is not allowed here; choose one of: {allowed}"})
    message = (message or "").strip()
    if len(message) > MAX_MESSAGE_CHARS:
        raise InvalidInput({"message": f"is {len(message)} characters; the limit is {MAX_MESSAGE_CHARS}"})
    if decision in (Decision.REJECT, Decision.RESPOND) and not message:
        what = "a reason for the agent" if decision == Decision.REJECT else "the text to give the agent"
        raise InvalidInput({"message": f"write {what}"})
    valid_args = None
    if decision == Decision.EDIT:
        agent = registry.get(request_.agent)
        tool = agent.tool(request_.action) if isinstance(agent, ToolAgent) else None
        if tool is None:
            raise InvalidInput({"args": f"the tool {request_.action!r} no longer exists"})
        try:
            valid_args = tool.validate_args(args if args is not None else {})
        except ToolArgumentsError as exc:
            raise InvalidInput(
                {f"args.{k}" if k != "__all__" else "args": v for k, v in exc.errors.items()}
            ) from exc
    return ValidDecision(decision=Decision(decision), args=valid_args, message=message)


def do_decide(request_id: int, *, reviewer: AbstractBaseUser, valid: ValidDecision) -> ApprovalRequest:
    """Store the decision; resume the thread when it was the last open one. Raise DecisionConflict
    if someone else decided first or the thread moved on."""
    with transaction.atomic():
        # Lock order everywhere: thread, then its requests (operators' edits take the same path).
        thread_id = ApprovalRequest.objects.values_list("thread_id", flat=True).get(pk=request_id)
        thread = get_backend().lock_thread(thread_id=thread_id)
        request_ = (
            ApprovalRequest.objects.select_for_update(of=("self",))
            .select_related("decided_by", "claimed_by")
            .get(pk=request_id)
        )
        if request_.is_pending and thread.head_id != str(request_.checkpoint_id):
            # Committed, not rolled back: the next reviewer sees why at once.
            supersede(request_, reason="the thread moved on to a newer checkpoint")
        if request_.is_claimed and request_.claimed_by_id != reviewer.pk:
            raise DecisionConflict(request_, claimed_message(request_))
        if request_.is_pending:
            _apply(request_, reviewer=reviewer, valid=valid)
            open_left = ApprovalRequest.objects.filter(
                checkpoint_id=request_.checkpoint_id, status=ApprovalStatus.PENDING
            ).exists()
            if not open_left and thread.status == ThreadStatus.WAITING:
                do_resume_after_gates(thread_id=thread.id, checkpoint_id=str(request_.checkpoint_id))
            return request_
    raise DecisionConflict(request_)


def claimed_message(request_: ApprovalRequest) -> str:
    name = request_.claimed_by.get_username() if request_.claimed_by else "someone"
    return f"Claimed by {name}: ask them to release it, or an admin to reassign it."


def _apply(request_: ApprovalRequest, *, reviewer: AbstractBaseUser, valid: ValidDecision) -> None:
    request_.status = STATUS_FOR[valid.decision]
    request_.decided_by = reviewer  # type: ignore[assignment]
    request_.decided_at = timezone.now()
    request_.decision_args = valid.args
    request_.decision_message = valid.message
    request_.claimed_by, request_.claimed_at, request_.claim_active_at = None, None, None
    request_.save(
        update_fields=[
            *("status", "decided_by", "decided_at", "decision_args", "decision_message"),
            *("claimed_by", "claimed_at", "claim_active_at"),
        ]
    )
    do_record_decision(
        thread_id=request_.thread_id,
        checkpoint_id=str(request_.checkpoint_id),
        key=request_.key,
        decision={
            "decision": str(valid.decision),
            "args": valid.args,
            "message": valid.message,
            "reviewer": reviewer.get_username(),
        },
    )
    do_audit(
        actor=reviewer,
        action=f"decision.{valid.decision}",
        thread_id=request_.thread_id,
        checkpoint_id=str(request_.checkpoint_id),
        approval=request_,
        data={**request_facts(request_), "args": valid.args, "message": valid.message},
    )
    ids = [request_.pk]
    events.on_commit(lambda: events.send_requests_closed(request_ids=ids))


def supersede(request_: ApprovalRequest, *, reason: str) -> None:
    request_.status = ApprovalStatus.SUPERSEDED
    request_.status_reason = reason
    request_.save(update_fields=["status", "status_reason"])
    ids = [request_.pk]
    events.on_commit(lambda: events.send_requests_closed(request_ids=ids))
