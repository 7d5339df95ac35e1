"""Dropping what no LangGraph checkpoint holds any more, and agents' retention for LangGraph threads."""

from collections import defaultdict
from collections.abc import Iterable
from dataclasses import dataclass, field
from datetime import datetime
from typing import Any, cast

from django.core.exceptions import ImproperlyConfigured
from django.db.models import Min

from checkpoints.langgraph import layout, sql
from checkpoints.models import Checkpoint, LangGraphCheckpoint, LangGraphWrite, StoredValue
from checkpoints.storage.crypto import current_sealer
from checkpoints.storage.loading import StoredRows, Tampered, load_values, wanted

NAMED_BY = "langgraph_checkpoint"
"""The field in which a Gatehouse checkpoint of a LangGraph agent names the LangGraph checkpoint it
stands for (agents.adapters.langgraph_agent.LangGraphState): a decision on it resumes from there."""
HELD_BY = "langgraph_thread"
"""The field naming the LangGraph thread that holds it (absent or empty: the Gatehouse thread's id)."""
BATCH = 500


def collect_garbage(using: str, thread_id: str) -> int:
    """Delete the thread's values and list items that no remaining checkpoint reaches."""
    graph = sql.blob_graph(using, thread_id)
    live: set[bytes] = set()
    for data in sql.write_data(using, thread_id):
        live.update(layout.write_keys(data))  # messages remaining writes name
    for refs in (
        LangGraphCheckpoint.objects.using(using).filter(thread_id=thread_id).values_list("refs", flat=True)
    ):
        for start in layout.starts(cast(dict[str, Any], refs)):
            key: bytes | None = start
            while key is not None and key not in live:
                live.add(key)
                prev, content = graph.get(key, (None, None))
                if content is not None:
                    live.add(content)
                key = prev
    return sql.delete_blobs(using, thread_id, set(graph) - live)


def prune_agent(
    *, using: str, agent: str, keep_last: int | None, older_than: datetime | None
) -> tuple[int, int]:
    """Apply an agent's retention to its LangGraph threads: drop checkpoints beyond the newest
    keep_last or older than older_than in each namespace, never the newest. Returns (checkpoints, values)."""
    rows = (
        LangGraphCheckpoint.objects.using(using)
        .filter(agent=agent)
        .order_by("thread_id", "checkpoint_ns", "-checkpoint_id")
    )
    doomed: list[tuple[str, str, str]] = []
    rank, group = 0, None
    for thread_id, ns, checkpoint_id, created_at in rows.values_list(
        "thread_id", "checkpoint_ns", "checkpoint_id", "created_at"
    ):
        rank = rank + 1 if group == (thread_id, ns) else 0
        group = (thread_id, ns)
        too_many = keep_last is not None and rank >= keep_last
        too_old = older_than is not None and created_at < older_than
        if rank and (too_many or too_old):
            doomed.append((thread_id, ns, checkpoint_id))
    if doomed:
        named = named_by_gatehouse(using=using, agent=agent)
        doomed = [d for d in doomed if not named.keeps(thread_id=d[0], checkpoint_id=d[2])]
    for thread_id, ns, checkpoint_id in doomed:
        for model in (LangGraphWrite, LangGraphCheckpoint):
            model.objects.using(using).filter(
                thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id
            ).delete()
    values = sum(collect_garbage(using, thread_id) for thread_id in {d[0] for d in doomed})
    return len(doomed), values


def delete_thread(*, using: str, thread_id: str, agent: str) -> None:
    """Delete a deleted Gatehouse thread's LangGraph checkpoints, writes and values (in its
    transaction, after its Gatehouse checkpoints). Values are keyed within a thread, so no other
    thread holds these; only the checkpoints another Gatehouse thread of the agent names stay (an
    imported thread copies the LangGraph thread it came from at its first step)."""
    if not LangGraphCheckpoint.objects.using(using).filter(thread_id=thread_id).exists():
        return
    named = named_by_gatehouse(using=using, agent=agent).checkpoints
    kept = [checkpoint_id for holder, checkpoint_id in named if holder == thread_id]
    for model in (LangGraphWrite, LangGraphCheckpoint):
        model.objects.using(using).filter(thread_id=thread_id).exclude(checkpoint_id__in=kept).delete()
    collect_garbage(using, thread_id)


def langgraph_agents(using: str = "default") -> list[str]:
    """The agents named by GatehouseSaver(agent=...) on stored LangGraph checkpoints."""
    rows = LangGraphCheckpoint.objects.using(using).exclude(agent="").order_by()
    return sorted(rows.values_list("agent", flat=True).distinct())


@dataclass
class Named:
    """The LangGraph checkpoints stored Gatehouse checkpoints name, which retention keeps."""

    checkpoints: set[tuple[str, str]] = field(default_factory=set)
    """(LangGraph thread, checkpoint id)."""
    threads: set[str] = field(default_factory=set)
    """LangGraph threads kept whole: a Gatehouse checkpoint names one of theirs unreadably."""
    everything: bool = False
    """A Gatehouse checkpoint names a LangGraph thread unreadably: any might be it."""

    def keeps(self, *, thread_id: str, checkpoint_id: str) -> bool:
        return self.everything or thread_id in self.threads or (thread_id, checkpoint_id) in self.checkpoints


def named_by_gatehouse(*, using: str, agent: str) -> Named:
    """What the agent's Gatehouse checkpoints name. Gatehouse retention has run first, so these are
    the ones it kept (heads, those pending approvals need): each resumes from the LangGraph
    checkpoint it names (one that names none, from its LangGraph thread's first), which must
    outlive any keep_last or TTL of LangGraph's own."""
    rows = (
        Checkpoint.objects.using(using)
        .filter(thread__agent=agent, refs__contains=f'"{NAMED_BY}":')  # narrowed here, parsed below
        .values_list("thread_id", "refs")
    )
    found = [(thread_id, _fields(cast(dict[str, Any], refs))) for thread_id, refs in rows.iterator()]
    stored = _stored_rows(using, found)
    named, from_the_start = Named(), set[str]()
    for thread_id, refs in found:
        holder = _read(refs, HELD_BY, rows=stored.get(thread_id, {}))
        checkpoint_id = _read(refs, NAMED_BY, rows=stored.get(thread_id, {}))
        if not isinstance(holder, str):
            named.everything = True  # we cannot tell which thread: keep them all
            continue
        holder_id = holder or thread_id
        if not isinstance(checkpoint_id, str):
            named.threads.add(holder_id)  # we cannot tell which checkpoint: keep the thread's
            from_the_start.add(thread_id)  # it may be "" as well
        elif checkpoint_id:
            named.checkpoints.add((holder_id, checkpoint_id))
        else:
            from_the_start.add(thread_id)
    # A checkpoint that names none (a thread's first) resumes from the first checkpoint of the
    # thread's own LangGraph thread (the adapter's _root): without it a fork from the start would
    # run on from the latest, another branch's end.
    named.checkpoints |= _roots(using, from_the_start)
    return named


def _roots(using: str, thread_ids: set[str]) -> set[tuple[str, str]]:
    """Each LangGraph thread's first checkpoint (its first input, step -1), as the adapter finds it."""
    batch, found = sorted(thread_ids), set[tuple[str, str]]()
    for start in range(0, len(batch), BATCH):
        rows = (
            LangGraphCheckpoint.objects.using(using)
            .filter(thread_id__in=batch[start : start + BATCH], checkpoint_ns="", metadata__step=-1)
            .values("thread_id")
            .annotate(first=Min("checkpoint_id"))
            .order_by()
        )
        found.update((row["thread_id"], row["first"]) for row in rows)
    return found


_UNREADABLE = object()
"""A field whose stored value is missing, fails decryption or does not match its digest."""


def _fields(refs: dict[str, Any]) -> dict[str, Any]:
    return {name: refs[name] for name in (NAMED_BY, HELD_BY) if name in refs}


def _stored_rows(using: str, found: Iterable[tuple[str, dict[str, Any]]]) -> dict[str, StoredRows]:
    """Per thread, the stored-value rows these refs name (a few queries for all of them)."""
    keys: dict[str, set[bytes]] = defaultdict(set)
    for thread_id, refs in found:
        keys[thread_id].update(wanted(refs).keys)
    rows: dict[str, StoredRows] = {}
    for thread_id, wanted_keys in keys.items():
        batch, thread_rows = sorted(wanted_keys), {}
        for start in range(0, len(batch), BATCH):
            query = StoredValue.objects.using(using).filter(
                thread_id=thread_id, key__in=batch[start : start + BATCH]
            )
            thread_rows.update({bytes(k): (None, d) for k, d in query.values_list("key", "data")})
        rows[thread_id] = thread_rows
    return rows


def _read(refs: dict[str, Any], name: str, *, rows: StoredRows) -> Any:
    """A field's value ("" when absent), read and checked as any checkpoint's; _UNREADABLE if not."""
    if name not in refs:
        return ""
    try:
        values, _, _ = load_values({name: refs[name]}, rows, sealer=current_sealer())
    except (Tampered, ImproperlyConfigured):  # missing, malformed, altered, or no key to open it
        return _UNREADABLE
    return values[name]
