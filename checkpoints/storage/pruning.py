"""What retention deletes from a thread, decided in plain Python (both backends use it)."""

from collections.abc import Collection, Iterable
from dataclasses import dataclass
from datetime import datetime
from typing import Any

from checkpoints.storage.loading import row_keys


@dataclass(frozen=True)
class Node:
    """A checkpoint as retention sees it."""

    id: str
    parent_id: str | None
    created_at: datetime
    step: int


@dataclass(frozen=True)
class Decision:
    doomed: set[str]
    """Checkpoints to delete."""
    relink: dict[str, str | None]
    """Kept checkpoints whose parent is doomed -> their nearest kept ancestor (None: none left)."""


def decide(
    nodes: list[Node],
    *,
    head_id: str | None,
    keep_last: int | None,
    older_than: datetime | None,
    protected: Collection[str],
) -> Decision:
    """Doom what is beyond the newest keep_last or older than older_than, except the head and
    protected. A loaded checkpoint needs no other checkpoint (its values hang off its own
    references), so the head's ancestors are history, not load dependencies."""
    newest = sorted(nodes, key=lambda n: (n.created_at, n.step), reverse=True)
    keep = {head_id, *protected}
    for rank, node in enumerate(newest):
        too_many = keep_last is not None and rank >= keep_last
        too_old = older_than is not None and node.created_at < older_than
        if not (too_many or too_old):
            keep.add(node.id)
    doomed = {n.id for n in nodes} - keep
    parents = {n.id: n.parent_id for n in nodes}
    relink = {
        n.id: _nearest_kept(parents, n.parent_id, doomed)
        for n in nodes
        if n.id not in doomed and n.parent_id in doomed
    }
    return Decision(doomed=doomed, relink=relink)


def _nearest_kept(parents: dict[str, str | None], start: str | None, doomed: set[str]) -> str | None:
    node, seen = start, set()
    while node is not None and node in doomed and node not in seen:
        seen.add(node)
        node = parents.get(node)
    return None if node in doomed else node


def unreachable(kept_refs: Iterable[dict[str, Any]], prevs: dict[bytes, bytes | None]) -> set[bytes]:
    """Stored rows (key -> prev) that no kept checkpoint's references lead to."""
    live: set[bytes] = set()
    for refs in kept_refs:
        for start in row_keys(refs):
            key: bytes | None = start
            while key is not None and key not in live:
                live.add(key)
                key = prevs.get(key)
    return set(prevs) - live
