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
from approvals.models import RAN, ApprovalRequest, ApprovalStatus, Queue
from checkpoints import selectors as checkpoint_selectors
from checkpoints.backends.base import CheckpointError, CorruptCheckpoint
from checkpoints.diff import json_object
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


def record_context(item: ApprovalRequest, user: AbstractBaseUser | AnonymousUser) -> dict[str, Any]:
    """The decision page as the record of what was asked: the conversation at the request's own
    checkpoint (not the thread's head), and the side effects already done that it may repeat."""
    from approvals import effects

    try:
        asked = load_checkpoint(
            thread_id=item.thread_id, checkpoint_id=str(item.checkpoint_id), agent=item.agent
        )
    except CheckpointError:
        return {}
    here = list(ApprovalRequest.objects.filter(checkpoint_id=item.checkpoint_id).select_related("decided_by"))
    same = effects.same_effects(user, action=item.action, args=item.args, exclude=item.pk)
    return {
        # While the thread still stands at the request, the live conversation is this one.
        "asked_conversation": None
        if str(item.thread.head_id) == str(item.checkpoint_id)
        else conversation(asked.values, requests=here),
        "asked_step": asked.step,
        "thread_effects": [e for e in effects.thread_effects(item.thread_id) if e.request.pk != item.pk],
        "same_effects": [e for e in same if e.thread_id != item.thread_id],
    }


def proposal_context(item: ApprovalRequest) -> dict[str, Any]:
    """The agent's reasoning behind a gated call and the request it answers, from the gate's checkpoint."""
    try:
        values = load_checkpoint(
            thread_id=item.thread_id, checkpoint_id=str(item.checkpoint_id), agent=item.agent
        ).values
    except CheckpointError:
        return {}
    messages = values.get("messages", [])
    reasoning, asked = "", ""
    for message in messages:
        if message.get("role") == "user":
            asked = message.get("content") or ""
        if any(c.get("id") == item.key for c in message.get("tool_calls") or []):
            reasoning = message.get("content") or ""
            break
    return {"reasoning": reasoning, "asked": asked}


@dataclass(frozen=True)
class ConversationItem:
    """One message as a person reads it."""

    role: str
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str = ""
    tool_name: str = ""
    result: str = ""
    """A tool's result that is a JSON object, one field per line like a call's arguments."""


def conversation(
    values: dict[str, Any],
    *,
    requests: list[ApprovalRequest] = (),  # type: ignore[assignment]
    shown: slice = slice(None),
) -> list[ConversationItem]:
    """Turn stored messages (those `shown`, all by default) into display items: tool calls with
    parsed arguments, their names, and the human decision on each gated call (with the arguments
    it ran with, if edited). Calls pair with requests over the whole conversation, so a page of
    it pairs as the whole would."""
    messages = values.get("messages", [])
    by_call = requests_by_call(messages, requests=list(requests))
    start, end, _ = shown.indices(len(messages))
    names: dict[str, str] = {}
    items = []
    for index, message in enumerate(messages[:end]):
        for call in message.get("tool_calls") or []:
            names[call.get("id", "")] = call.get("function", {}).get("name", "")
        if index >= start:
            items.append(_conversation_item(message, by_call=by_call, names=names))
    return items


def _conversation_item(
    message: dict[str, Any], *, by_call: dict[str, ApprovalRequest], names: dict[str, str]
) -> ConversationItem:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        request_ = by_call.get(call.get("id", ""))
        args, proposed = _pretty(function.get("arguments")), ""
        if request_ is not None and request_.status in RAN and request_.decision_args is not None:
            # What ran is the reviewer's edit, as the ledger has it; the message may hold the proposal.
            written = _parsed(function.get("arguments"))
            args = _pretty(_ordered_like(request_.decision_args, written))
            proposed = _pretty(_ordered_like(request_.args, written))
        calls.append(
            {
                "id": call.get("id"),
                "name": function.get("name"),
                "args": args,
                "proposed": proposed if proposed != args else "",
                "edited": bool(call.get("edited")),
                "request": request_,
            }
        )
    return ConversationItem(
        role=message.get("role", ""),
        content=message.get("content") or "",
        tool_calls=calls,
        tool_call_id=message.get("tool_call_id", ""),
        tool_name=names.get(message.get("tool_call_id", ""), ""),
        result=_object_result(message),
    )


def requests_by_call(
    messages: list[dict[str, Any]], *, requests: list[ApprovalRequest]
) -> dict[str, ApprovalRequest]:
    """The request that decided each tool call, by the call's id (the newest, when one was asked
    again). A request's key is its call's id, except where an adapter keys its gates otherwise
    (LangGraph: an interrupt's id and index): such a request answers the first call not yet
    answered that has its action and proposed arguments, as the adapter matched them."""
    calls = [c for m in messages for c in m.get("tool_calls") or [] if isinstance(c, dict)]
    ids = {c.get("id") for c in calls}
    found = {r.key: r for r in requests if r.key in ids}
    replaced = {r.supersedes_id for r in requests}
    others = [r for r in requests if r.key not in ids and r.pk not in replaced]
    for call in calls:
        if call.get("id") in found or not others:
            continue
        function = call.get("function", {})
        name, args = function.get("name"), _parsed(function.get("arguments"))
        match = next((r for r in others if r.action == name and r.args == args), None)
        if match is not None:
            others.remove(match)
            found[call.get("id", "")] = match
    return found


def _ordered_like(value: Any, written: Any) -> Any:
    """An object with its fields in the order the agent wrote the call's (the database keeps
    them sorted), any others after."""
    if not (isinstance(value, dict) and isinstance(written, dict)):
        return value
    return {k: value[k] for k in written if k in value} | value


def _parsed(raw: Any) -> Any:
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


def _object_result(message: dict[str, Any]) -> str:
    """A tool message whose content is a JSON object (OpenAI's format keeps a result as text),
    shown as its fields; any other content is shown as written."""
    content = message.get("content")
    if message.get("role") != "tool" or not isinstance(content, str) or not content.startswith("{"):
        return ""
    value = json_object(content)
    return _pretty(value) if value else ""


def _pretty(raw: Any) -> str:
    """A call's arguments one per line, text as written (an email body keeps its line breaks
    instead of showing JSON's \\n); anything that is not an object stays JSON."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except (TypeError, ValueError):
        return str(raw)
    if not isinstance(value, dict):
        return json.dumps(value, indent=2, ensure_ascii=False)
    lines = []
    for key, item in value.items():
        if isinstance(item, str) and "\n" in item:
            lines.append(f"{key}:\n  " + item.replace("\n", "\n  "))
        else:
            lines.append(f"{key}: {item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)}")
    return "\n".join(lines)


CONVERSATION_PAGE = 100
"""Messages a thread page shows at a time: a page pushed live on every step stays small."""
SIDE_REQUESTS = 50
"""Requests the thread page's side lists, the newest; older ones are tagged on their calls."""


class NoSuchMessages(ValueError):
    """A page of the conversation the thread's head does not have."""


def conversation_page(total: int, *, before: str | None) -> slice:
    """The CONVERSATION_PAGE messages before position `before` (a query parameter: the newest
    when None). Raises NoSuchMessages unless it is a whole number from 1 to `total`."""
    if before is None:
        return slice(max(0, total - CONVERSATION_PAGE), total)
    # ASCII digits only ("²" is a digit int() refuses), and few.
    if not (before.isascii() and before.isdecimal() and len(before) < 10 and 1 <= int(before) <= total):
        raise NoSuchMessages(f"This conversation has no messages before {before[:20]!r}.")
    end = int(before)
    return slice(max(0, end - CONVERSATION_PAGE), end)


def thread_context(thread_id: str, *, messages_before: str | None = None) -> dict[str, Any]:
    """What the conversation partial needs, read from the thread's head checkpoint: one page of
    its messages (see conversation_page), the requests those need, and the newest requests."""
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
    newest = list(requests.order_by("-created_at", "-id")[:SIDE_REQUESTS])
    return {
        "thread": thread,
        "conversation": conversation(
            values, requests=requests_shown(requests, messages, shown=shown), shown=shown
        ),
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
        "thread_requests_more": requests.count() - len(newest),
    }


def requests_shown(
    requests: QuerySet[ApprovalRequest], messages: list[dict[str, Any]], *, shown: slice
) -> list[ApprovalRequest]:
    """The requests that may answer the shown messages' calls, oldest first: those keyed by the
    calls' ids, and those of the calls' tools an adapter keyed otherwise (by no call's id), which
    requests_by_call pairs in order over the whole conversation."""
    calls = [c for m in messages[shown] for c in m.get("tool_calls") or [] if isinstance(c, dict)]
    if not calls:
        return []
    every = {c.get("id") for m in messages for c in m.get("tool_calls") or [] if isinstance(c, dict)}
    tools = {c.get("function", {}).get("name") for c in calls}
    wanted = Q(key__in={c.get("id") for c in calls}) | (Q(action__in=tools) & ~Q(key__in=every))
    return list(requests.filter(wanted).order_by("created_at", "id"))


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
