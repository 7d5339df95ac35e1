"""The audit ledger: append-only, hash-chained. `actions.ledger` verifies the chain."""

import hashlib
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import transaction
from django.utils import timezone

from approvals.models import ApprovalRequest, AuditEvent, LedgerHead
from checkpoints.digest import canonical_json

GENESIS_HASH = "0" * 64


def event_hash(*, prev_hash: str, body: dict[str, Any]) -> str:
    return hashlib.sha256((prev_hash + canonical_json(body)).encode()).hexdigest()


def event_body(event: AuditEvent) -> dict[str, Any]:
    """The fields a hash covers."""
    return {
        "actor": event.actor_name,
        "action": event.action,
        "thread": event.thread_id,
        "checkpoint": event.checkpoint_id,
        "approval": event.approval_ref,
        "data": event.data,
        "at": event.created_at.isoformat(),
    }


def do_audit(
    *,
    actor: AbstractBaseUser | AnonymousUser | None,
    action: str,
    thread_id: str = "",
    checkpoint_id: str = "",
    approval: ApprovalRequest | None = None,
    data: dict[str, Any] | None = None,
) -> AuditEvent:
    """Append an event to the ledger, chained to the previous one, in the caller's transaction.
    A None actor is the system (expiry, idle claims)."""
    known = actor is not None and actor.is_authenticated
    with transaction.atomic():
        head, _ = LedgerHead.objects.select_for_update().get_or_create(pk=1)
        event = AuditEvent(
            actor=actor if known else None,  # type: ignore[misc]
            actor_name=actor.get_username() if known else "system",  # type: ignore[union-attr]
            action=action,
            thread_id=thread_id,
            checkpoint_id=checkpoint_id,
            approval=approval,
            approval_ref=approval.pk if approval is not None else None,
            data=data or {},
            created_at=timezone.now(),
            prev_hash=head.last_hash,
        )
        event.hash = event_hash(prev_hash=head.last_hash, body=event_body(event))
        event.save()
        head.last_hash = event.hash
        head.save(update_fields=["last_hash"])
    return event


def audit_request(
    request_: ApprovalRequest,
    *,
    actor: AbstractBaseUser | AnonymousUser | None,
    action: str,
    data: dict[str, Any],
    seen: dict[str, Any] | None = None,
) -> AuditEvent:
    """Record an action on a request, with what its reviewer saw of it (`seen`, when taken
    before the action changed the request; else its facts now) and the action's `data`."""
    return do_audit(
        actor=actor,
        action=action,
        thread_id=request_.thread_id,
        checkpoint_id=str(request_.checkpoint_id),
        approval=request_,
        data={**(request_facts(request_) if seen is None else seen), **data},
    )


def request_facts(request_: ApprovalRequest) -> dict[str, Any]:
    """What a reviewer saw of a request: recorded with every action on it."""
    return {
        "action": request_.action,
        "queue": request_.queue,
        "args_seen": request_.args,
        "state_digest": request_.state_digest,
    }
