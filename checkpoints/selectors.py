"""Reads of the store that the apps above it ask for, so that none of them queries its models
itself or touches how values are stored (list items, runs, sealing) or how pending writes are
kept. Thread rows come back as `Thread` (the read shape the inbox lists and links by foreign
key); a missing one raises Thread.DoesNotExist, like any Django model."""

import json
import re
from typing import Any

from django.contrib.postgres.search import SearchQuery, SearchVectorField
from django.core.exceptions import ImproperlyConfigured
from django.db import connection
from django.db.models import BooleanField, F, Func, Q, QuerySet, Subquery, Value

from checkpoints.models import Checkpoint, PendingWrite, StoredValue, Thread
from checkpoints.storage.crypto import SealError, current_sealer
from checkpoints.storage.layout import LIST


def thread(thread_id: str) -> Thread:
    """The thread with its head, or raise Thread.DoesNotExist."""
    return Thread.objects.select_related("head").get(pk=thread_id)


def thread_exists(thread_id: str) -> bool:
    return Thread.objects.filter(pk=thread_id).exists()


def missing_threads(thread_ids: set[str]) -> set[str]:
    """Those of the ids that name no thread (deleted since something recorded them)."""
    return thread_ids - set(Thread.objects.filter(pk__in=thread_ids).values_list("pk", flat=True))


def thread_agent(thread_id: str) -> str | None:
    """The agent that runs the thread, or None if there is no such thread."""
    return Thread.objects.filter(pk=thread_id).values_list("agent", flat=True).first()


def all_threads() -> QuerySet[Thread, Thread]:
    return Thread.objects.all()


def threads_in(ids: "QuerySet[Any, Any]") -> QuerySet[Thread, Thread]:
    """The threads whose ids a query (say, of approval requests' thread ids) yields."""
    return Thread.objects.filter(pk__in=ids)


def threads_matching(q: str) -> QuerySet[Thread, Any]:
    """Ids of threads whose id contains q or that hold a message with every word of q.

    Words match a message's string values, never its field names (a search for "content"
    does not find every thread). A UNION lets each search use its own index on Postgres (an
    OR would scan). List items are stored once per thread, not per checkpoint; encrypted ones
    cannot be searched. On Postgres messages match by full-text search (whole words,
    web-search syntax: "a phrase", or, -word), served by storedvalue_item_words; elsewhere by
    a substring scan of the values for each word."""
    by_id = Thread.objects.filter(id__icontains=q).order_by().values("id")
    items = StoredValue.objects.filter(run__isnull=False)
    if connection.vendor == "postgresql":
        words = SearchQuery(single_negations(q), config="simple", search_type="websearch")
        items = items.annotate(words=MessageWords("data")).filter(words=words)
    else:
        for word in q.split():
            if not {'"', "\\"} & set(word):  # JSON escapes these: the stored text may not hold them as typed
                items = items.filter(data__icontains=word)  # a fast scan, so few items are parsed
            items = items.filter(ValueContains("data", word))
    return by_id.union(items.order_by().values("thread_id"))


def single_negations(q: str) -> str:
    """q with a run of dashes read as one: Postgres's web-search syntax nests a NOT per dash
    and refuses 33 of them ("tsquery stack too small"), well inside a search's 200 characters."""
    return NEGATED_DASH.sub("", q)


NEGATED_DASH = re.compile(r"-(?=[^\w\"]*-)")


class MessageWords(Func):
    """The words of a stored item's string values (Postgres; the expression its index has)."""

    function = "gatehouse_message_words"
    output_field = SearchVectorField()


class ValueContains(Func):
    """Whether a string value anywhere in a stored item's JSON contains the text (SQLite only)."""

    output_field = BooleanField()

    def __init__(self, column: str, text: str) -> None:
        escaped = text.replace("\\", "\\\\").replace("%", "\\%").replace("_", "\\_")
        super().__init__(F(column), Value(f"%{escaped}%"))

    def as_sqlite(self, compiler: Any, connection: Any, **extra: Any) -> tuple[str, list[Any]]:
        (data, data_params), (pattern, pattern_params) = (
            compiler.compile(e) for e in self.source_expressions
        )
        sql = (
            f"EXISTS (SELECT 1 FROM json_tree(CASE WHEN json_valid({data}) THEN {data} ELSE '[]' END)"
            f" WHERE type = 'text' AND value LIKE {pattern} ESCAPE '\\')"
        )
        return sql, [*data_params, *data_params, *pattern_params]


def first_messages(thread_ids: list[str]) -> dict[str, str]:
    """Each thread's first message (what its person asked), in one query: the first item of its
    message list. A fork that edited that item leaves two; either serves to tell threads apart."""
    rows = (
        StoredValue.objects.filter(thread_id__in=set(thread_ids), run__isnull=False, depth=0)
        .order_by()
        .values_list("thread_id", "run", "data")
    )
    sealer, found = current_sealer(), {}
    for thread_id, _, data in sorted(rows, key=lambda r: (r[0], r[1])):
        if thread_id in found:
            continue
        item = _opened(data, sealer)
        if isinstance(item, dict) and isinstance(item.get("content"), str):
            found[thread_id] = item["content"]
    return found


def _opened(data: str, sealer: Any) -> Any:
    """A stored list item as it was written, or None if it cannot be read here (sealed with a
    key this process lacks, or not JSON): a page then shows less, never fails."""
    try:
        return json.loads(sealer.open(data))
    except (ValueError, SealError, ImproperlyConfigured):
        return None


TAIL = 20
"""List items last_user_messages reads first, from the end of each message list."""


def last_user_messages(
    checkpoints: list[tuple[str, str]], *, refs: dict[str, Any] | None = None
) -> dict[str, str]:
    """The newest user message of each (thread id, checkpoint id)'s message list, by checkpoint
    id: what its person last asked on that branch. One query for the lists' last TAIL items,
    one more for the items before them of the lists whose person spoke earlier, and one for the
    checkpoints whose references `refs` (by checkpoint id) does not carry."""
    known = dict(refs or {})
    missing = {c for _, c in checkpoints if c not in known}
    if missing:
        known |= {str(k): v for k, v in Checkpoint.objects.filter(id__in=missing).values_list("id", "refs")}
    runs = {c: _message_runs(known.get(c)) for _, c in checkpoints}
    sealer = current_sealer()
    # The last TAIL items first: a 2,000-message conversation is not read for its last question.
    tails = {c: _split(runs[c], TAIL)[1] for c in runs}
    items = _list_items([(t, run, low, high) for t, c in checkpoints for run, low, high in tails[c]])
    found = {c: _last_user_message(items, thread_id=t, runs=tails[c], sealer=sealer) for t, c in checkpoints}
    # Then the rest, for the few whose person spoke before that (one more query).
    rest = {c: _split(runs[c], TAIL)[0] for _, c in checkpoints if not found[c]}
    items = _list_items(
        [(t, run, low, high) for t, c in checkpoints if c in rest for run, low, high in rest[c]]
    )
    found |= {
        c: _last_user_message(items, thread_id=t, runs=rest[c], sealer=sealer)
        for t, c in checkpoints
        if c in rest
    }
    return found


def _split(
    runs: list[tuple[int, int, int]], tail: int
) -> tuple[list[tuple[int, int, int]], list[tuple[int, int, int]]]:
    """The runs (run, first depth, end depth) cut into the items before the last `tail`, and those."""
    cut = max(0, runs[-1][2] - tail) if runs else 0
    before = [(run, low, min(high, cut)) for run, low, high in runs if low < cut]
    last = [(run, max(low, cut), high) for run, low, high in runs if high > cut]
    return before, last


def _message_runs(refs: Any) -> list[tuple[int, int, int]]:
    """(run, first depth, end depth) of each run the `messages` list lives in (its reference:
    [LIST, digest, length, [[run, first depth], ...]])."""
    ref = refs.get("messages") if isinstance(refs, dict) else None
    if not (isinstance(ref, list) and len(ref) == 4 and ref[0] == LIST):
        return []
    starts = sorted((int(first), int(run)) for run, first in ref[3])
    ends = [first for first, _ in starts[1:]] + [int(ref[2])]
    return [(run, first, end) for (first, run), end in zip(starts, ends, strict=True)]


def _list_items(ranges: list[tuple[str, int, int, int]]) -> dict[tuple[str, int, int], str]:
    """The stored list items of each (thread, run, from depth, to depth), by (thread, run, depth)."""
    if not ranges:
        return {}
    wanted = Q()
    for thread_id, run, low, high in ranges:
        wanted |= Q(thread_id=thread_id, run=run, depth__gte=low, depth__lt=high)
    found = StoredValue.objects.filter(wanted).values_list("thread_id", "run", "depth", "data")
    return {(thread_id, run or 0, depth or 0): data for thread_id, run, depth, data in found}


def _last_user_message(
    items: dict[tuple[str, int, int], str], *, thread_id: str, runs: list[tuple[int, int, int]], sealer: Any
) -> str:
    """The newest user message among the stored items, read from the end (few are opened)."""
    for run, low, high in reversed(runs):
        for depth in range(high - 1, low - 1, -1):
            data = items.get((thread_id, run, depth))
            message = _opened(data, sealer) if data is not None else None
            if (
                isinstance(message, dict)
                and message.get("role") == "user"
                and isinstance(message.get("content"), str)
            ):
                return message["content"]
    return ""


def write_time(*, checkpoint_id: Any, task_id: Any) -> Subquery:
    """When the pending write `task_id` was recorded at the checkpoint (NULL if it was not), as
    a subquery over outer references: say, when a gated call's result was recorded."""
    rows = PendingWrite.objects.filter(checkpoint_id=checkpoint_id, task_id=task_id)
    return Subquery(rows.values("created_at")[:1])
