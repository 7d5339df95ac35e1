"""Dropping what no LangGraph checkpoint holds any more, and agents' retention for LangGraph threads."""

from datetime import datetime
from typing import Any, cast

from checkpoints.langgraph import layout, sql
from checkpoints.models import LangGraphCheckpoint, LangGraphWrite


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
    doomed, rank, group = [], 0, None
    for thread_id, ns, checkpoint_id, created_at in rows.values_list(
        "thread_id", "checkpoint_ns", "checkpoint_id", "created_at"
    ):
        rank = rank + 1 if group == (thread_id, ns) else 0
        group = (thread_id, ns)
        too_many = keep_last is not None and rank >= keep_last
        too_old = older_than is not None and created_at < older_than
        if rank and (too_many or too_old):
            doomed.append((thread_id, ns, checkpoint_id))
    for thread_id, ns, checkpoint_id in doomed:
        for model in (LangGraphWrite, LangGraphCheckpoint):
            model.objects.using(using).filter(
                thread_id=thread_id, checkpoint_ns=ns, checkpoint_id=checkpoint_id
            ).delete()
    values = sum(collect_garbage(using, thread_id) for thread_id in {d[0] for d in doomed})
    return len(doomed), values


def langgraph_agents(using: str = "default") -> list[str]:
    """The agents named by GatehouseSaver(agent=...) on stored LangGraph checkpoints."""
    rows = LangGraphCheckpoint.objects.using(using).exclude(agent="").order_by()
    return sorted(rows.values_list("agent", flat=True).distinct())
