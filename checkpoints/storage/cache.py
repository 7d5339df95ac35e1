"""A per-process cache of recently written or read checkpoints' layouts.

A writer compares the new state with its parent's; the parent is almost always the
checkpoint this process just wrote or loaded, so the comparison costs no query. Entries are
keyed by checkpoint id (a random UUID) and checkpoints are immutable, so an entry never
goes stale: a put against a checkpoint deleted since still fails its existence check.
"""

import threading
from collections import OrderedDict

from checkpoints.storage.layout import Layout

DEFAULT_MAX_BYTES = 64 * 1024 * 1024


class LayoutCache:
    """Least-recently-used layouts, bounded by their approximate size in memory."""

    def __init__(self, *, max_bytes: int = DEFAULT_MAX_BYTES) -> None:
        self.max_bytes = max_bytes
        self._entries: OrderedDict[tuple[str, str], Layout] = OrderedDict()
        self._bytes = 0
        self._lock = threading.Lock()

    def get(self, *, alias: str, checkpoint_id: str) -> Layout | None:
        with self._lock:
            layout = self._entries.get((alias, checkpoint_id))
            if layout is not None:
                self._entries.move_to_end((alias, checkpoint_id))
            return layout

    def put(self, *, alias: str, layout: Layout) -> None:
        key = (alias, layout.checkpoint_id)
        with self._lock:
            if key in self._entries:
                self._bytes -= self._entries.pop(key).weight
            self._entries[key] = layout
            self._bytes += layout.weight
            while self._bytes > self.max_bytes and len(self._entries) > 1:
                self._bytes -= self._entries.popitem(last=False)[1].weight

    def discard_thread(self, *, alias: str, thread_id: str) -> None:
        with self._lock:
            for key in [k for k, v in self._entries.items() if k[0] == alias and v.thread_id == thread_id]:
                self._bytes -= self._entries.pop(key).weight

    def clear(self) -> None:
        with self._lock:
            self._entries.clear()
            self._bytes = 0
