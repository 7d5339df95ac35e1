"""Reads for pages, pushes and the API."""

import hashlib
import json
from dataclasses import dataclass
from datetime import timedelta
from typing import Any

from django.contrib.auth.models import AbstractBaseUser, AnonymousUser
from django.db.models import Count, F, Q, QuerySet
from django.utils import timezone

from agents.loading import load_checkpoint
from agents.registry import registry
from approvals.access import Access, reviewers_who_may_decide
from approvals.conversation import conversation_page, gate_message, shown_conversation, shown_conversations
from approvals.models import ApprovalRequest, ApprovalStatus, Queue
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends.base import CheckpointData, CheckpointError, CorruptCheckpoint
from checkpoints.store import tenant_of

INBOX_LIMIT = 200  # rows rendered; the count says how many more wait


def known_queues() -> list[str]:
    """Every queue a registered gate names or escalates to, every queue an admin created, and
    every queue holding a pending request (a policy's route, an adapter's or an import's queue)."""
    queues = set(Queue.objects.values_list("name", flat=True))
    pending = ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING).order_by()
    queues.update(pending.values_list("queue", flat=True).distinct())
    for agent in registry.all():
        for approval in agent.approvals():
            queues.add(approval.queue)
            if approval.expiry and approval.expiry.to_queue:
                queues.add(approval.expiry.to_queue)
    return sorted(queues)


def visible_queues(user: AbstractBaseUser | AnonymousUser) -> list[str]:
    return Access.of(user).visible_queues(known_queues())


@dataclass(frozen=True)
class InboxFilter:
    """What a reviewer narrowed the inbox to (empty: everything they may see)."""

    queue: str = ""
    agent: str = ""
    min_age_s: int = 0


def pending_requests(
    user: AbstractBaseUser | AnonymousUser, filters: InboxFilter = InboxFilter()
) -> QuerySet[ApprovalRequest]:
    """The user's inbox: pending requests in queues they may see, oldest first."""
    requests = Access.of(user).visible_requests(ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING))
    if filters.queue:
        requests = requests.filter(queue=filters.queue)
    if filters.agent:
        requests = requests.filter(agent=filters.agent)
    if filters.min_age_s:
        requests = requests.filter(created_at__lte=timezone.now() - timedelta(seconds=filters.min_age_s))
    return requests.select_related("thread", "claimed_by").order_by("created_at", "id")


@dataclass(frozen=True)
class QueueCount:
    name: str
    pending: int
    claimed: int


def queue_counts(user: AbstractBaseUser | AnonymousUser) -> list[QueueCount]:
    """Pending and claimed counts for every queue the user may see, empty ones included."""
    pending = Access.of(user).visible_requests(ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING))
    rows = {
        row["queue"]: row
        for row in pending.order_by()
        .values("queue")
        .annotate(pending=Count("id"), claimed=Count("id", filter=Q(claimed_by__isnull=False)))
    }
    names = sorted(set(visible_queues(user)) | set(rows))
    return [
        QueueCount(
            name=n, pending=rows.get(n, {}).get("pending", 0), claimed=rows.get(n, {}).get("claimed", 0)
        )
        for n in names
    ]


def pending_counts() -> dict[str, tuple[int, int]]:
    """Every queue's pending and claimed counts, for whoever may see them (one query)."""
    rows = (
        ApprovalRequest.objects.filter(status=ApprovalStatus.PENDING)
        .order_by()
        .values("queue")
        .annotate(pending=Count("id"), claimed=Count("id", filter=Q(claimed_by__isnull=False)))
    )
    return {row["queue"]: (row["pending"], row["claimed"]) for row in rows}


def counts_seen(
    counts: dict[str, tuple[int, int]], *, visible: set[str], closed: set[str]
) -> list[QueueCount]:
    """queue_counts from pending_counts for a viewer who sees `visible` and none of `closed`."""
    names = sorted(visible | {q for q in counts if q not in closed})
    return [
        QueueCount(name=n, pending=counts.get(n, (0, 0))[0], claimed=counts.get(n, (0, 0))[1]) for n in names
    ]


def inbox_context(user: AbstractBaseUser | AnonymousUser, filters: InboxFilter) -> dict[str, Any]:
    """What the inbox page and its live pushes render."""
    requests = pending_requests(user, filters)
    total = requests.count()
    queues = queue_counts(user)
    # Each gate's checkpoint references ride along: quoting every row's message is one query more.
    rows = requests.annotate(checkpoint_refs=F("checkpoint__refs"))
    items = with_asked_messages(list(rows[:INBOX_LIMIT]))
    from approvals import effects

    effects.flag_done(user, items)
    return {
        "items": items,
        "fingerprint": inbox_fingerprint(items, queues, total),
        "count": total,
        "more": max(total - INBOX_LIMIT, 0),
        "queues": queues,
        "all_pending": sum(q.pending for q in queues),
        "can_read_ledger": Access.of(user).can_read_ledger,
        "filters": filters,
        "user": user,
        "now": timezone.now(),
    }


def with_asked_messages(items: list[ApprovalRequest]) -> list[ApprovalRequest]:
    """Set `asked_message` on each request: the last user message before its gate, on the gate's
    branch (a later turn of the thread, not its first message), as the decision page quotes it.
    Two queries whatever the number of rows; one if the rows carry `checkpoint_refs`."""
    known = {str(r.checkpoint_id): r.checkpoint_refs for r in items if hasattr(r, "checkpoint_refs")}
    asked = checkpoint_selectors.last_user_messages(
        [(r.thread_id, str(r.checkpoint_id)) for r in items], refs=known
    )
    for item in items:
        item.asked_message = asked.get(str(item.checkpoint_id), "")  # type: ignore[attr-defined]
    return items


def inbox_fingerprint(items: list[ApprovalRequest], queues: list[QueueCount], total: int) -> str:
    """What an inbox shows, hashed: a page skips the catch-up push that would show it the same."""
    # The thread's status too: a row says when its thread is paused.
    shown = [
        (r.pk, r.queue, r.claimed_by_id, r.escalated_from, str(r.expires_at), r.thread.status) for r in items
    ]
    counts = [(q.name, q.pending, q.claimed) for q in queues]
    return hashlib.sha256(json.dumps([shown, counts, total]).encode()).hexdigest()[:16]


@dataclass(frozen=True)
class RequestRoute:
    """Where news of a request goes: its queue's inboxes and its thread's pages."""

    pk: int
    queue: str
    thread_id: str

    @classmethod
    def of(cls, request_: ApprovalRequest) -> "RequestRoute":
        """The route of a request row already in hand: no query."""
        return cls(pk=request_.pk, queue=request_.queue, thread_id=request_.thread_id)


def requests_by_ids(ids: list[int]) -> list[ApprovalRequest]:
    return list(
        ApprovalRequest.objects.filter(pk__in=ids).select_related("thread", "decided_by", "claimed_by")
    )


def neighbours(user: AbstractBaseUser | AnonymousUser, item: ApprovalRequest) -> dict[str, int | None]:
    """The previous and next pending items of the user's inbox, around this one (for j/k)."""
    pending = pending_requests(user).exclude(pk=item.pk)
    after = Q(created_at__gt=item.created_at) | Q(created_at=item.created_at, id__gt=item.pk)
    following = pending.filter(after).values_list("pk", flat=True).first()
    previous = pending.exclude(after).order_by("-created_at", "-id").values_list("pk", flat=True).first()
    return {"next_id": following, "prev_id": previous}


def asked_checkpoint(item: ApprovalRequest) -> CheckpointData | None:
    """The checkpoint the request was asked at (None if it cannot be read)."""
    try:
        return load_checkpoint(
            thread_id=item.thread_id, checkpoint_id=str(item.checkpoint_id), agent=item.agent
        )
    except CheckpointError:
        return None


def record_context(
    item: ApprovalRequest,
    user: AbstractBaseUser | AnonymousUser,
    *,
    asked: CheckpointData | None,
    asked_before: str | None = None,
) -> dict[str, Any]:
    """The decision page as the record of what was asked: one page of the conversation at the
    request's own checkpoint `asked` (not the thread's head; the newest by default, back to the
    gated call), and the side effects already done that it may repeat. Raises NoSuchMessages
    unless `asked_before` is None or a page the conversation has (see conversation_page)."""
    from approvals import effects

    if asked is None:
        return {}
    messages = asked.values.get("messages", [])
    shown = conversation_page(len(messages), before=asked_before)
    gate = gate_message(messages, request_=item)
    if gate is not None and asked_before is None:
        shown = slice(min(shown.start, gate), shown.stop)  # the gated call is never paged away
    # An earlier page keeps the gated call in sight, below it.
    pinned = slice(0) if gate is None or shown.start <= gate < shown.stop else slice(gate, gate + 1)
    here = ApprovalRequest.objects.filter(checkpoint_id=item.checkpoint_id).select_related("decided_by")
    same = effects.same_effects(user, action=item.action, args=item.args, exclude=item.pk)
    # While the thread still stands at the request, the live conversation is this one.
    at_head = str(item.thread.head_id) == str(item.checkpoint_id)
    # The page and the pinned gated call read their requests in one query.
    page, gate_items = (
        (None, []) if at_head else shown_conversations(asked.values, requests=here, shown=[shown, pinned])
    )
    return {
        "asked_conversation": page,
        "asked_gate": gate_items,
        # Positions, for the pager, as the thread page's (_thread_live.html).
        "asked_first": shown.start + 1,
        "asked_last": shown.stop,
        "asked_total": len(messages),
        "asked_older": shown.start,
        "asked_before": "" if asked_before is None else str(shown.stop),
        "asked_step": asked.step,
        "thread_effects": [e for e in effects.thread_effects(item.thread_id) if e.request.pk != item.pk],
        "same_effects": [e for e in same if e.thread_id != item.thread_id],
    }


def proposal_context(item: ApprovalRequest, *, asked: CheckpointData | None) -> dict[str, Any]:
    """The agent's reasoning behind a gated call and the request it answers, from the gate's
    checkpoint `asked` (see asked_checkpoint)."""
    if asked is None:
        return {}
    messages = asked.values.get("messages", [])
    reasoning, asked_text = "", ""
    for message in messages:
        if message.get("role") == "user":
            asked_text = message.get("content") or ""
        if any(c.get("id") == item.key for c in message.get("tool_calls") or []):
            reasoning = message.get("content") or ""
            break
    return {"reasoning": reasoning, "asked": asked_text}


SIDE_REQUESTS = 50
"""Requests the thread page's side lists, the newest; older ones are tagged on their calls."""


def thread_context(
    thread_id: str, *, messages_before: str | None = None, side_requests: bool = True
) -> dict[str, Any]:
    """What the conversation partial needs, read from the thread's head checkpoint: one page of
    its messages (see conversation_page), the requests those need, and (`side_requests`, for the
    thread page's side) the newest requests."""
    thread = checkpoint_selectors.thread(thread_id)
    values: dict[str, Any] = {}
    unreadable = ""
    if thread.head_id:
        try:
            values = load_checkpoint(thread_id=thread_id, agent=thread.agent).values
        except CorruptCheckpoint as exc:  # said on the page: its history is where to go from here
            unreadable = str(exc)
    messages = values.get("messages", [])
    shown = conversation_page(len(messages), before=messages_before)
    requests = thread.approval_requests.select_related("decided_by")
    newest = list(requests.order_by("-created_at", "-id")[:SIDE_REQUESTS]) if side_requests else []
    return {
        "thread": thread,
        "conversation": shown_conversation(values, requests=requests, shown=shown),
        # Positions, for the pager: "messages 1,901 to 2,000 of 2,000", the link to the page before.
        "messages_first": shown.start + 1,
        "messages_last": shown.stop,
        "messages_total": len(messages),
        "messages_older": shown.start,
        "messages_before": "" if messages_before is None else str(shown.stop),
        "unreadable": unreadable,
        "offline": bool(thread.metadata.get("offline_model")),
        "tenant": tenant_of(thread),
        "thread_requests": newest[::-1],
        "thread_requests_more": requests.count() - len(newest) if side_requests else 0,
    }


def eligible_reviewers(queue: str, *, limit: int = 200) -> list[AbstractBaseUser]:
    """Active users who may decide requests in the queue: the choices for reassigning one."""
    from django.contrib.auth import get_user_model

    users = (
        get_user_model()
        .objects.filter(is_active=True)
        .filter(Q(is_superuser=True) | Q(groups__name__in=["reviewer", "admin"]))
        .distinct()
        .order_by("username")
        .prefetch_related("groups")[:limit]
    )
    return reviewers_who_may_decide(users, queue)


def status_context(item: ApprovalRequest, user: AbstractBaseUser | AnonymousUser) -> dict[str, Any]:
    """What a request's status line needs: its claim, and what this user may do about it."""
    can_manage = Access.of(user).can_manage_claims
    return {
        "item": item,
        "can_claim": item.is_pending and Access.of(user).can_decide(item.queue),
        "can_manage": can_manage,
        "reviewers": eligible_reviewers(item.queue) if can_manage and item.is_pending else [],
        "now": timezone.now(),
    }
