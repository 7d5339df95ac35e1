"""Reads for the thread list, history and diff pages."""

import json
from dataclasses import dataclass
from datetime import date
from typing import Any

from django.db.models import Count, QuerySet

from agents.graph import Agent
from agents.loading import load_checkpoint
from agents.registry import UnknownAgent, registry
from approvals.access import Access, User
from approvals.actions.standing import standing_decisions
from approvals.day_range import whole_days
from approvals.models import AuditEvent
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData, CheckpointError, CheckpointSummary
from checkpoints.diff import Change, diff_values
from checkpoints.history import Branch, build_tree
from checkpoints.models import CheckpointSource, Thread, ThreadStatus
from checkpoints.selectors import first_messages, threads_matching

HISTORY_LIMIT = 1000
HISTORY_PAGE = 100
"""Checkpoints a page's history tree shows: a page pushed live on every step stays small."""
NOTE_LIMIT = 20


@dataclass(frozen=True)
class ThreadFilters:
    agent: str = ""
    status: str = ""
    created_after: date | None = None
    created_before: date | None = None
    decided_by: str = ""
    q: str = ""


def filtered_threads(user: User, filters: ThreadFilters) -> QuerySet[Thread]:
    """Threads the user may see, filtered, newest activity first."""
    rows = Access.of(user).visible_threads()
    if filters.agent:
        rows = rows.filter(agent=filters.agent)
    if filters.status:
        rows = rows.filter(status=filters.status)
    rows = rows.filter(whole_days("created_at", since=filters.created_after, until=filters.created_before))
    if filters.decided_by:
        rows = rows.filter(approval_requests__decided_by__username=filters.decided_by).distinct()
    if filters.q:
        rows = rows.filter(id__in=threads_matching(filters.q))
    return rows.order_by("-updated_at", "id")


def annotate_page(threads: list[Thread]) -> list[Thread]:
    """Set `first_message` and `pending` (open approval requests) on one page of threads, in
    two queries whatever the page size."""
    from approvals.models import ApprovalRequest, ApprovalStatus

    ids = [t.id for t in threads]
    asked = first_messages(ids)
    pending = dict(
        ApprovalRequest.objects.filter(thread_id__in=ids, status=ApprovalStatus.PENDING)
        .order_by()
        .values("thread_id")
        .annotate(n=Count("id"))
        .values_list("thread_id", "n")
    )
    for thread in threads:
        thread.first_message = asked.get(thread.id, "")  # type: ignore[attr-defined]
        thread.pending = pending.get(thread.id, 0)  # type: ignore[attr-defined]
    return threads


def history(thread: Thread) -> list[Branch]:
    checkpoints = get_backend().history(thread_id=thread.id, limit=HISTORY_LIMIT)
    return build_tree(checkpoints, head_id=str(thread.head_id) if thread.head_id else None)


def history_context(thread: Thread, *, before: str | None = None) -> dict[str, Any]:
    """One page of the history tree (the newest HISTORY_PAGE checkpoints, older than `before`
    when given) and a note on each fork and state edit: who, and what they changed. A long
    thread's page links to the next older page (`history_older`). Raises CheckpointNotFound
    for a `before` that is not the thread's."""
    found = get_backend().history(thread_id=thread.id, limit=HISTORY_PAGE + 1, before=before)
    checkpoints = found[:HISTORY_PAGE]
    return {
        "history": build_tree(checkpoints, head_id=str(thread.head_id) if thread.head_id else None),
        "notes": change_notes(thread, checkpoints),
        "history_older": checkpoints[-1].id if len(found) > HISTORY_PAGE else "",
        "history_before": before or "",
    }


def side_context(thread: Thread, user: User, *, history_before: str | None = None) -> dict[str, Any]:
    """What the thread page's side needs (controls, history, who paused it), for its first
    render and for every live push."""
    return {
        **history_context(thread, before=history_before),
        "can_operate": Access.of(user).can_operate,
        "state_editable": state_editable(thread.agent),
        "paused_by": paused_by(thread),
        "standing": standing_decisions(thread.id),
        "can_revoke_standing": Access.of(user).can_revoke_standing,
    }


def paused_by(thread: Thread) -> AuditEvent | None:
    """The ledger event of the pause that holds a paused thread (None unless it is paused)."""
    if thread.status != ThreadStatus.PAUSED:
        return None
    return AuditEvent.objects.filter(thread_id=thread.id, action="thread.pause").order_by("-id").first()


def change_notes(thread: Thread, checkpoints: list[CheckpointSummary]) -> dict[str, str]:
    """'forked by olga from step 0: messages[0].content "…1001" → "…1003"', by checkpoint id
    (the newest NOTE_LIMIT forks and edits). What changed is what the ledger recorded, in one
    query; an edit it has no entry for (say, an imported thread's) is diffed against its parent."""
    by_id = {c.id: c for c in checkpoints}
    notes = {}
    edits = [c for c in checkpoints if c.source in (CheckpointSource.FORK, CheckpointSource.UPDATE)]
    recorded = recorded_changes(thread.id, checkpoint_ids=[c.id for c in edits[:NOTE_LIMIT]])
    for c in edits[:NOTE_LIMIT]:
        who = c.created_by.partition(":")[2] or c.created_by or "someone"
        parent = by_id.get(c.parent_id or "")
        if c.source == CheckpointSource.FORK:
            head = f"forked by {who}" + (f" from step {parent.step}" if parent else "")
        else:
            head = f"state edited by {who}"
        changes = recorded.get(c.id)
        if changes is None:
            try:
                changes = diff_against_parent(checkpoint(thread, c.id), agent=thread.agent)
            except CheckpointError:
                changes = []
        notes[c.id] = f"{head}: {describe_changes(changes)}" if changes else f"{head}, nothing edited"
    return notes


def recorded_changes(thread_id: str, *, checkpoint_ids: list[str]) -> dict[str, list[Change]]:
    """What the ledger recorded an operator changed at these checkpoints (edits and forks)."""
    events = AuditEvent.objects.filter(
        thread_id=thread_id, checkpoint_id__in=checkpoint_ids, action__in=("thread.update", "thread.fork")
    ).values_list("checkpoint_id", "data")
    return {
        checkpoint_id: [Change(**change) for change in data.get("changes", [])]
        for checkpoint_id, data in events
    }


def describe_changes(changes: list[Change], *, limit: int = 2) -> str:
    """The first changes in one line: 'messages[0].content “…order ORD-1001” → “…order ORD-1003”;
    and 2 more'. Texts are quoted; numbers, true/false and null are not."""
    parts = []
    for change in changes[:limit]:
        if change.kind == "changed":
            old, new = _from_first_difference(_note_text(change.old), _note_text(change.new))
            parts.append(
                f"{change.path} {_quoted(_short(old), change.old)} → {_quoted(_short(new), change.new)}"
            )
        else:
            parts.append(f"{change.path} {change.kind}")
    more = len(changes) - limit
    return "; ".join(parts) + (f"; and {more} more" if more > 0 else "")


def _note_text(value: Any) -> str:
    return value if isinstance(value, str) else json.dumps(value, ensure_ascii=False, sort_keys=True)


def _quoted(shown: str, value: Any) -> str:
    return f"“{shown}”" if isinstance(value, str) else shown


def _from_first_difference(old: str, new: str, *, context: int = 16) -> tuple[str, str]:
    """Both texts from the word where they begin to differ, give or take a few words: a long
    value's note shows what changed ('…"amount_cents": 4250}' → '…"amount_cents": 1000}'), not
    the start they share."""
    old, new = " ".join(old.split()), " ".join(new.split())
    shared = next(
        (i for i, (a, b) in enumerate(zip(old, new, strict=False)) if a != b), min(len(old), len(new))
    )
    cut = max(0, shared - context)
    if cut:
        # At a word's start (the same in both texts: they agree up to `shared`), a little
        # earlier rather than later; only a word longer than the context (a URL) is cut inside.
        back, ahead = old.rfind(" ", max(0, cut - context), cut), old.find(" ", cut, shared)
        cut = back + 1 if back >= 0 else 0 if cut <= context else ahead + 1 if ahead >= 0 else cut
    return ("…" + old[cut:], "…" + new[cut:]) if cut else (old, new)


def _short(text: str, width: int = 40) -> str:
    """At most `width` characters, cut after a whole word (mid-word only in one longer than half)."""
    text = " ".join(text.split())
    if len(text) <= width:
        return text
    space = text.rfind(" ", 0, width)
    return (text[:space] if space > width // 2 else text[: width - 1]) + "…"


def checkpoint(thread: Thread, checkpoint_id: str) -> CheckpointData:
    """One checkpoint, its values at the agent's current schema version."""
    return load_checkpoint(thread_id=thread.id, checkpoint_id=checkpoint_id, agent=thread.agent)


def diff_against_parent(item: CheckpointData, *, agent: str | None = None) -> list[Change]:
    if not item.parent_id:
        return diff_values({}, item.values)
    parent = load_checkpoint(thread_id=item.thread_id, checkpoint_id=item.parent_id, agent=agent)
    return diff_values(parent.values, item.values)


def diff_between(thread: Thread, *, from_id: str, to_id: str) -> list[Change]:
    old, new = checkpoint(thread, from_id), checkpoint(thread, to_id)
    return diff_values(old.values, new.values)


def pretty(values: dict[str, Any], *, agent: str = "") -> str:
    """The state as indented JSON, its fields in the order the agent's state declares them (the
    conversation first, as agents declare it), not the order the store returns."""
    definition = _registered(agent)
    declared = list(definition.state.model_fields) if definition is not None else []
    ordered = {k: values[k] for k in declared if k in values} | values
    return json.dumps(ordered, indent=2, ensure_ascii=False)


def history_list(
    thread: Thread, *, limit: int = HISTORY_LIMIT, before: str | None = None
) -> list[CheckpointSummary]:
    """The newest checkpoints without their values, newest first, older than `before` (a
    checkpoint id) when given: for pickers, and the API's pages."""
    return get_backend().history(thread_id=thread.id, limit=max(1, min(limit, HISTORY_LIMIT)), before=before)


def fork_note(agent: str) -> str:
    """What a fork of this agent's thread runs again, if its runtime says more than the page does."""
    definition = _registered(agent)
    return definition.fork_note if definition is not None else ""


def edit_note(agent: str) -> str:
    """What an operator may edit in this agent's state, if its runtime says more than the page does."""
    definition = _registered(agent)
    return definition.edit_note if definition is not None else ""


def state_editable(agent: str) -> bool:
    """Whether operators may edit this agent's state here (False for an agent no longer registered)."""
    definition = _registered(agent)
    return definition is not None and definition.state_editable


def _registered(agent: str) -> Agent | None:
    """The agent's definition, or None for a thread of an agent no longer registered."""
    try:
        return registry.get(agent)
    except UnknownAgent:
        return None
