"""Shapes the API reads and writes."""

from typing import Any, Literal

from ninja import Schema
from pydantic import ConfigDict

from approvals.actions.signoffs import needs_signoffs, signoff_names
from approvals.models import ApprovalRequest


class ApprovalOut(Schema):
    id: int
    thread_id: str
    checkpoint_id: str
    action: str
    args: dict[str, Any]
    allowed_decisions: list[str]
    description: str
    queue: str
    status: str
    decided_by: str | None
    decision_args: dict[str, Any] | None
    decision_message: str
    status_reason: str
    claimed_by: str | None
    escalated_from: str
    expires_at: Any
    created_at: Any
    decided_at: Any = None
    """When it was decided (a decided list's order); null while pending, and once undone."""
    undo_until: Any = None
    """While set, the decision can be undone (POST …/undo) and has not taken effect."""
    supersedes: int | None = None
    consequential: bool = False
    policy: str = ""
    """The policy that decided, routed or required this request: "'small refunds' v3"."""
    required_approvals: int = 1
    approvals: list[str] = []
    """Under a policy's require: who approved so far (the request waits for required_approvals)."""

    @staticmethod
    def from_request(r: ApprovalRequest) -> "ApprovalOut":
        return ApprovalOut(
            id=r.pk,
            thread_id=r.thread_id,
            checkpoint_id=str(r.checkpoint_id),
            action=r.action,
            args=r.args,
            allowed_decisions=r.allowed_decisions,
            description=r.description,
            queue=r.queue,
            status=r.status,
            decided_by=r.decided_by.get_username() if r.decided_by else None,
            decision_args=r.decision_args,
            decision_message=r.decision_message,
            status_reason=r.status_reason,
            claimed_by=r.claimed_by.get_username() if r.claimed_by else None,
            escalated_from=r.escalated_from,
            expires_at=r.expires_at,
            created_at=r.created_at,
            decided_at=r.decided_at,
            undo_until=r.undo_until,
            supersedes=r.supersedes_id,
            consequential=r.consequential,
            policy=r.policy_label,
            required_approvals=r.required_approvals,
            approvals=signoff_names(r) if needs_signoffs(r) else [],
        )


class ThreadOut(Schema):
    id: str
    agent: str
    status: str
    head: str | None
    values: dict[str, Any]
    pending_approvals: list[ApprovalOut]
    error: str
    offline_model: bool
    tenant: str
    """The thread's cross-thread store namespace: the tenant it started with, else agent:<agent>."""
    created_at: Any
    updated_at: Any


class StartThreadIn(Schema):
    model_config = ConfigDict(extra="forbid")

    agent: str
    input: str
    thread_id: str | None = None
    tenant: str | None = None
    """Whose cross-thread memory the thread's tools use (same rule as ids); default: its agent's."""


class ClaimIn(Schema):
    model_config = ConfigDict(extra="forbid")  # a misspelt field is an error, not a silent default

    op: Literal["claim", "release", "reassign"] = "claim"
    to: str | None = None
    """For reassign (admins): the username to hand the request to."""


class DecisionIn(Schema):
    model_config = ConfigDict(extra="forbid")

    decision: Literal["approve", "edit", "reject", "respond"]
    args: dict[str, Any] | None = None
    message: str = ""
    approved_args: dict[str, Any] | None = None
    """An approve's arguments as the client read them (`decision_args`, else `args`): under the
    two-person rule, another reviewer's edit since makes it a 409 instead of a sign-off."""
