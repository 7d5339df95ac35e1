"""The audit ledger: append-only, hash-chained. `actions.ledger` verifies the chain."""

import hashlib
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db import connection, transaction
from django.utils import timezone

from approvals.models import ApprovalRequest, AuditEvent, LedgerHead
from checkpoints.digest import canonical_json

GENESIS_HASH = "0" * 64

_held_back: ContextVar[list[Callable[[], None]] | None] = ContextVar("held_back_appends", default=None)


@contextmanager
def appended_last() -> Iterator[None]:
    """Hold back the ledger appends made inside until the block ends, then make them in order:
    put at the end of a transaction, they are its last statements. The ledger's head lock, which
    orders every append, is then held for them and the commit only, not while the rest of the
    transaction (a step's commit, a decision resuming its thread) runs. Inside another such
    block, the outer one appends them. If the block raises, they are dropped with its rollback."""
    if _held_back.get() is not None:
        yield
        return
    appends: list[Callable[[], None]] = []
    token = _held_back.set(appends)
    try:
        yield
    finally:
        _held_back.reset(token)
    for append in appends:
        append()


def event_hash(*, prev_hash: str, body: dict[str, Any]) -> str:
    return chained(prev_hash, canonical_json(body))


def chained(prev_hash: str, body: str) -> str:
    """The hash of an event's canonical body after the previous hash (Postgres computes the same
    in _append_in_one_statement)."""
    return hashlib.sha256((prev_hash + body).encode()).hexdigest()


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
    """Append an event to the ledger, chained to the previous one, in the caller's transaction
    (inside `appended_last`, at its end). A None actor is the system (expiry, idle claims)."""
    known = actor is not None and actor.is_authenticated
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
    )
    body = canonical_json(event_body(event))
    if (held_back := _held_back.get()) is not None:
        held_back.append(lambda: _append(event, body=body))
        return event
    _append(event, body=body)
    return event


def _append(event: AuditEvent, *, body: str) -> None:
    if connection.vendor == "postgresql":
        while not _append_in_one_statement(event, body=body):
            LedgerHead.objects.get_or_create(pk=1)  # the first event ever: no head row yet
        return
    # The head row's lock orders every append; it is held until the caller commits.
    with transaction.atomic(savepoint=False):
        head, _ = LedgerHead.objects.select_for_update().get_or_create(pk=1)
        event.prev_hash = head.last_hash
        event.hash = chained(head.last_hash, body)
        event.save()
        head.last_hash = event.hash
        head.save(update_fields=["last_hash"])


_SET_BY_POSTGRES = ("id", "prev_hash", "hash")


def _append_in_one_statement(event: AuditEvent, *, body: str) -> bool:
    """On Postgres: lock the head, insert the event chained to it (its hash computed by Postgres,
    as event_hash computes it) and move the head, in one round trip. The head's lock orders
    every append and is held until the caller commits: appended last (as decisions do), it is
    held for one statement and the commit, not for three statements, a savepoint and the
    Python between them (decisions queued on it). False: no head row yet."""
    fields = [f for f in AuditEvent._meta.concrete_fields if f.name not in _SET_BY_POSTGRES]
    columns = ", ".join(connection.ops.quote_name(f.column) for f in fields)
    values = [f.get_db_prep_save(getattr(event, f.attname), connection) for f in fields]
    events, heads = AuditEvent._meta.db_table, LedgerHead._meta.db_table
    with connection.cursor() as cursor:
        cursor.execute(
            f"WITH head AS (SELECT last_hash FROM {heads} WHERE id = 1 FOR UPDATE), "
            f"event AS (INSERT INTO {events} ({columns}, prev_hash, hash) "
            f"SELECT {', '.join(['%s'] * len(values))}, last_hash, "
            "encode(sha256(convert_to(last_hash || %s, 'UTF8')), 'hex') FROM head "
            "RETURNING id, prev_hash, hash) "
            f"UPDATE {heads} SET last_hash = event.hash FROM event WHERE {heads}.id = 1 "
            "RETURNING event.id, event.prev_hash, event.hash",
            [*values, body],
        )
        row = cursor.fetchone()
    if row is None:
        return False
    event.pk, event.prev_hash, event.hash = row
    event._state.adding, event._state.db = False, connection.alias
    return True


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
    """What a reviewer saw of a request: recorded with every action on it. A pending request
    shows the arguments an approval is for: under the two-person rule, the last edit's."""
    return {
        "action": request_.action,
        "queue": request_.queue,
        "args_seen": request_.effective_args if request_.is_pending else request_.args,
        "state_digest": request_.state_digest,
    }
