"""Open approval requests when a step reaches a gate; close them when the thread moves on."""

from datetime import timedelta
from typing import Any

from django.db.models import Q
from django.utils import timezone

from agents import gates as gate_protocol
from agents.graph import Gate
from approvals import events
from approvals.actions import notify
from approvals.actions.audit import appended_last, audit_request, request_facts
from approvals.actions.expiry import default_reason, describe_duration, escalation_reason
from approvals.actions.policy_gates import do_apply_policies
from approvals.models import DECIDED, ApprovalRequest, ApprovalStatus, ExpiryAction
from approvals.selectors import RequestRoute
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData
from checkpoints.backends.orm import prepared


def _expiry_fields(gate: Gate) -> dict[str, Any]:
    """The gate's expiry policy, copied onto the request so it holds whatever the code says later."""
    expiry = gate.approval.expiry
    if expiry is None:
        return {}
    if expiry.action == ExpiryAction.ESCALATE:
        reason = expiry.reason or f"Nobody decided within {describe_duration(expiry.after_s)}."
    else:
        reason = expiry.reason or default_reason(expiry.after_s)
    return {
        "expires_at": timezone.now() + timedelta(seconds=expiry.after_s),
        "expiry_action": ExpiryAction(expiry.action),
        "expiry_reason": reason[:300],
        "escalate_to": expiry.to_queue,
    }


def do_open_requests(
    *, thread_id: str, agent: str, checkpoint: CheckpointData, gates: list[Gate]
) -> list[ApprovalRequest]:
    """Create one pending request per gate. Runs inside the step's transaction."""
    # A gate asked again under a new key (a LangGraph interrupt raised anew) names the old one.
    asked_as = [gate.asks_again or gate.key for gate in gates]
    originals = _originals(thread_id=thread_id, keys=asked_as)
    created = ApprovalRequest.objects.bulk_create(
        [
            ApprovalRequest(
                thread_id=thread_id,
                checkpoint_id=checkpoint.id,
                key=gate.key,
                agent=agent,
                action=gate.action,
                args=gate.args,
                allowed_decisions=[str(d) for d in gate.approval.decisions],
                description=gate.description,
                queue=gate.approval.queue,
                state_digest=checkpoint.digest,
                consequential=gate.approval.consequential,
                **_expiry_fields(gate),
            )
            for gate in gates
        ]
    )
    asked_before = _link_to_originals(created, asked_as, originals) if originals else {}
    asked_in = {r.pk: r.queue for r in created}  # before a route policy moves one
    # A policy's ledger events are appended after its decisions resume the thread, as the gates'
    # last statements: the ledger's lock is not held while the thread is resumed.
    with appended_last():
        if do_apply_policies(created, thread_id=thread_id, agent=agent):
            thread = get_backend().get_thread(thread_id=thread_id)  # as the step's commit left it
            # No person decided: the step queues with new threads', not ahead of people's.
            gate_protocol.resume_if_decided(thread=thread, checkpoint_id=checkpoint.id, by_person=False)
        if asked_before:
            _keep_escalations(created, asked_before, asked_in=asked_in)
    opened = [RequestRoute.of(r) for r in created if r.is_pending]
    if opened:
        events.on_commit(lambda: events.send_requests_opened(requests=opened))
        notify.notify_on_commit(event=notify.PENDING, request_ids=[r.pk for r in opened])
    return created


def _originals(*, thread_id: str, keys: list[str]) -> dict[str, int]:
    """Per gate key, the superseded request that asked it last and was not asked again yet (a
    gate asked again after an edit or fork). A prepared statement: it runs at every gate, where
    the ORM spent about a millisecond of CPU compiling it and Postgres 0.45 ms planning it."""
    if not keys:
        return {}
    table = ApprovalRequest._meta.db_table
    marks = ", ".join(["%s"] * len(keys))
    rows = prepared.fetch_all(
        f"SELECT o.key, o.id FROM {table} o WHERE o.thread_id = %s AND o.key IN ({marks}) "
        f"AND o.status = %s AND NOT EXISTS (SELECT 1 FROM {table} r WHERE r.supersedes_id = o.id) "
        "ORDER BY o.id",
        [thread_id, *keys, ApprovalStatus.SUPERSEDED.value],
    )
    return dict(rows)  # ordered by id: a key's newest wins


def _link_to_originals(
    created: list[ApprovalRequest], asked_as: list[str], originals: dict[str, int]
) -> dict[int, ApprovalRequest]:
    """A gate asked again points at the request it replaces and keeps its place in the queue:
    the original's created_at. `asked_as` is each request's gate key as asked before. Returns,
    per new request's id, the one it replaces."""
    fields = ("pk", "created_at", "queue", "escalated_from")
    asked = ApprovalRequest.objects.only(*fields).in_bulk(list(originals.values()))
    replaced = {}
    for request_, key in zip(created, asked_as, strict=True):
        if (original := originals.pop(key, None)) is None:
            continue
        request_.supersedes_id, request_.created_at = original, asked[original].created_at
        ApprovalRequest.objects.filter(pk=request_.pk).update(
            supersedes_id=original, created_at=request_.created_at
        )
        replaced[request_.pk] = asked[original]
    return replaced


def _keep_escalations(
    created: list[ApprovalRequest], asked_before: dict[int, ApprovalRequest], *, asked_in: dict[int, str]
) -> None:
    """A gate asked again after its request escalated stays escalated: in the queue it went to,
    its expiry spent (else it went back to reviewers who had let it lapse, for a new period).
    `asked_in` is each request's queue before the policies ran.

    Unless a route policy sent it to other reviewers: the escalation was a deadline passing on
    the earlier request, with the reviewers it was in; the route is an admin's rule on these
    arguments, and the request says it was routed (its policy, the ledger's `policy.route`). It
    waits where the route sent it, timed anew: those reviewers never had it."""
    for request_ in created:
        original = asked_before.get(request_.pk)
        if not (request_.is_pending and original and original.escalated_from):
            continue
        if request_.expiry_action != ExpiryAction.ESCALATE or request_.escalate_to != original.queue:
            continue  # the gate's expiry changed since: it escalates elsewhere, or not at all
        if request_.queue not in (asked_in[request_.pk], original.escalated_from, original.queue):
            continue  # routed to reviewers who never had it: the route stands
        seen, moved_from = request_facts(request_), request_.queue
        request_.queue, request_.escalated_from = original.queue, original.escalated_from
        request_.status_reason = escalation_reason(request_, source=original.escalated_from)
        request_.expires_at = None
        request_.save(update_fields=["queue", "escalated_from", "status_reason", "expires_at"])
        if moved_from != request_.queue:
            # The ledger says where it is, after the `policy.route` a policy may have appended.
            data = {"reason": request_.status_reason, "to": request_.queue, "supersedes": original.pk}
            audit_request(request_, actor=None, action="expiry.escalate", seen=seen, data=data)


def do_supersede_requests(*, thread_id: str, reason: str) -> int:
    """Mark every pending request of the thread superseded. Call with the thread locked."""
    # Decisions still inside their undo window never took effect: withdrawn with the rest.
    open_ = Q(status=ApprovalStatus.PENDING) | Q(status__in=DECIDED, undo_until__isnull=False)
    closed = [
        RequestRoute(pk=pk, queue=queue, thread_id=thread_id)
        for pk, queue in ApprovalRequest.objects.filter(open_, thread_id=thread_id).values_list("pk", "queue")
    ]
    if closed:
        ApprovalRequest.objects.filter(pk__in=[r.pk for r in closed]).update(
            status=ApprovalStatus.SUPERSEDED, status_reason=reason[:300], undo_until=None
        )
        events.on_commit(lambda: events.send_requests_closed(requests=closed))
    return len(closed)


def on_gates_opened(
    sender: Any, *, thread_id: str, agent: str, checkpoint: CheckpointData, gates: list[Gate], **kwargs: Any
) -> None:
    do_open_requests(thread_id=thread_id, agent=agent, checkpoint=checkpoint, gates=gates)


def on_gates_superseded(sender: Any, *, thread_id: str, reason: str, **kwargs: Any) -> None:
    do_supersede_requests(thread_id=thread_id, reason=reason)


def open_request_checkpoints(sender: Any, *, thread_id: str, **kwargs: Any) -> list[str]:
    """Retention keeps the checkpoints pending requests point at: a decision must find its gate."""
    pending = ApprovalRequest.objects.filter(thread_id=thread_id, status=ApprovalStatus.PENDING)
    return [str(pk) for pk in pending.values_list("checkpoint_id", flat=True)]
