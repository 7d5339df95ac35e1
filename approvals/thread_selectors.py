"""Reads for the thread list, history and diff pages."""

import json
from dataclasses import dataclass
from datetime import date, datetime, time, timedelta
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchVector
from django.db import connection
from django.db.models import QuerySet
from django.utils import timezone

from approvals.thread_access import User, visible_threads
from checkpoints.backends import get_backend
from checkpoints.backends.base import CheckpointData, CheckpointSummary
from checkpoints.diff import Change, diff_values
from checkpoints.history import Branch, build_tree
from checkpoints.models import StoredValue, Thread

HISTORY_LIMIT = 1000


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
    rows = visible_threads(user)
    if filters.agent:
        rows = rows.filter(agent=filters.agent)
    if filters.status:
        rows = rows.filter(status=filters.status)
    # Whole days in the current time zone, as datetime bounds so the created_at index serves them.
    if filters.created_after:
        rows = rows.filter(created_at__gte=_midnight(filters.created_after))
    if filters.created_before:
        rows = rows.filter(created_at__lt=_midnight(filters.created_before + timedelta(days=1)))
    if filters.decided_by:
        rows = rows.filter(approval_requests__decided_by__username=filters.decided_by).distinct()
    if filters.q:
        # A UNION of the two searches lets each use its own index on Postgres; an OR would scan.
        by_id = Thread.objects.filter(id__icontains=filters.q).order_by().values("id")
        rows = rows.filter(id__in=by_id.union(_mentioning(filters.q)))
    return rows.order_by("-updated_at", "id")


def _mentioning(q: str) -> QuerySet[StoredValue, Any]:
    """Threads with a message that holds every word of q. List items are stored once per
    thread, not per checkpoint; encrypted ones cannot be searched. On Postgres: full-text
    search (whole words, web-search syntax: "a phrase", or, -word), served by
    storedvalue_item_fts; elsewhere a scan for each word as a substring."""
    items = StoredValue.objects.filter(run__isnull=False)
    if connection.vendor == "postgresql":
        words = SearchQuery(q, config="simple", search_type="websearch")
        items = items.annotate(words=SearchVector("data", config="simple")).filter(words=words)
    else:
        for word in q.split():
            items = items.filter(data__icontains=word)
    return items.order_by().values("thread_id")


def _midnight(day: date) -> datetime:
    return timezone.make_aware(datetime.combine(day, time.min))


def history(thread: Thread) -> list[Branch]:
    checkpoints = get_backend().history(thread_id=thread.id, limit=HISTORY_LIMIT)
    return build_tree(checkpoints, head_id=str(thread.head_id) if thread.head_id else None)


def checkpoint(thread: Thread, checkpoint_id: str) -> CheckpointData:
    return get_backend().get(thread_id=thread.id, checkpoint_id=checkpoint_id)


def diff_against_parent(item: CheckpointData) -> list[Change]:
    if not item.parent_id:
        return diff_values({}, item.values)
    parent = get_backend().get(thread_id=item.thread_id, checkpoint_id=item.parent_id)
    return diff_values(parent.values, item.values)


def diff_between(thread: Thread, *, from_id: str, to_id: str) -> list[Change]:
    backend = get_backend()
    old = backend.get(thread_id=thread.id, checkpoint_id=from_id)
    new = backend.get(thread_id=thread.id, checkpoint_id=to_id)
    return diff_values(old.values, new.values)


def pretty(values: dict[str, Any]) -> str:
    return json.dumps(values, indent=2, ensure_ascii=False)


def history_list(thread: Thread) -> list[CheckpointSummary]:
    """The newest checkpoints without their values, newest first (for pickers and the API)."""
    return get_backend().history(thread_id=thread.id, limit=HISTORY_LIMIT)
