"""Persistent lists: a list field is a chain of items, each stored once and shared by forks.

The store knows nothing of reducers, so it finds what a new list shares with its parent's
by comparing items: an append shares the whole old list, an edit in the middle shares the
items before it. Comparison is Python's `==` (C speed) against decoded copies that nobody
else holds, made type-strict where it matters (1 == 1.0 == True, yet their JSON differs).

Items also carry a run and a depth (their index). Appends continue their run, so a list
is a few runs (one, for a conversation nobody forked or edited) and reads back with an
index range scan per run; prev links stay the truth, runs only make reading fast.
"""

import bisect
import json
import secrets
from dataclasses import dataclass, field
from typing import Any

from checkpoints.digest import LIST_SEED, canonical_json, chain, row_key

Segment = tuple[int, int]
"""(run, depth of its first item in this list)."""


@dataclass(frozen=True)
class Item:
    """A list item to store."""

    key: bytes
    """The row key (digest.row_key) of the chain digest up to this item."""
    prev: bytes | None
    plain: str
    run: int
    depth: int


def new_run() -> int:
    """A run id: random, 31 bits; runs only need to differ within one thread."""
    return secrets.randbits(31)


@dataclass
class ListState:
    """A stored list as a writer of the next checkpoint needs it."""

    keys: list[bytes]
    """The chain digest up to and including each item: also the item's storage key."""
    ends: list[int]
    """The running total of the items' canonical JSON bytes."""
    segments: list[Segment] = field(default_factory=list)
    """The runs this list's items live in; the last one takes the next append."""
    items: list[Any] | None = None
    """Decoded copies of the items, never handed to a caller, so nobody can mutate them."""
    numeric: list[int] | None = None
    """Indices of the items that hold a number or a boolean (compared type-strictly)."""
    raw: list[str] | None = None
    """The items' canonical JSON, kept from a load until `items` is first needed."""

    @property
    def length(self) -> int:
        return len(self.keys)

    @property
    def digest(self) -> bytes:
        return self.keys[-1] if self.keys else LIST_SEED

    @property
    def size(self) -> int:
        """Bytes of the whole list's canonical JSON."""
        return 2 + self.ends[-1] + len(self.ends) - 1 if self.ends else 2

    def snapshot(self) -> tuple[list[Any], list[int]]:
        """Decode the items once (lazily: a load that is never followed by a write skips it)."""
        if self.items is None or self.numeric is None:
            items = json.loads("[" + ",".join(self.raw) + "]") if self.raw else []
            self.numeric = [i for i, item in enumerate(items) if holds_numbers(item)]
            self.items = items
            self.raw = None
        return self.items, self.numeric

    def shared_prefix(self, new: list[Any]) -> int:
        """How many leading items of `new` equal (as JSON) this list's."""
        items, numeric = self.snapshot()
        n = min(len(items), len(new))
        shared = n if items[:n] == new[:n] else _first_difference(items, new, n)
        for i in numeric[: bisect.bisect_left(numeric, shared)]:
            if not strict_equal(items[i], new[i]):
                return i
        return shared


def grow(old: ListState | None, new: list[Any], *, branch: bool = False) -> tuple[ListState, list[Item]]:
    """Return the state of `new` and the items it adds. Appends continue the parent's last
    run, unless this write branches (a fork, an edit, a cut), which starts a new run."""
    shared = old.shared_prefix(new) if old is not None else 0
    state = _prefix(old, shared)
    if branch or not state.segments or (old is not None and shared < old.length):
        state.segments.append((new_run(), shared))
    run = state.segments[-1][0]
    items, numeric = state.snapshot()
    added = []
    for item in new[shared:]:
        plain = canonical_json(item)
        encoded = plain.encode()
        prev = state.keys[-1] if state.keys else None
        state.keys.append(chain(prev or LIST_SEED, encoded))
        state.ends.append((state.ends[-1] if state.ends else 0) + len(encoded))
        copy = json.loads(plain)  # our own copy: the caller may mutate `item` later
        if holds_numbers(copy):
            numeric.append(len(items))
        items.append(copy)
        key, before = row_key(state.keys[-1]), row_key(prev) if prev else None
        added.append(Item(key, before, plain, run, len(state.keys) - 1))
    return state, added


def _prefix(old: ListState | None, shared: int) -> ListState:
    """The first `shared` items of old, as a state ready to be appended to."""
    if old is None:
        return ListState(keys=[], ends=[], items=[], numeric=[])
    items, numeric = old.snapshot()
    return ListState(
        keys=old.keys[:shared],
        ends=old.ends[:shared],
        # A run that starts where the list ends is the one that takes its appends.
        segments=[s for s in old.segments if s[1] < shared or s[1] == shared == old.length],
        items=items[:shared],
        numeric=numeric[: bisect.bisect_left(numeric, shared)],
    )


def _first_difference(old: list[Any], new: list[Any], n: int) -> int:
    for i in range(n):
        if old[i] != new[i]:
            return i
    return n


def holds_numbers(value: Any) -> bool:
    """True if a decoded JSON value holds a number or a boolean anywhere."""
    if isinstance(value, bool | int | float):
        return True
    if isinstance(value, dict):
        return any(holds_numbers(v) for v in value.values())
    if isinstance(value, list):
        return any(holds_numbers(v) for v in value)
    return False


def strict_equal(stored: Any, new: Any) -> bool:
    """Equal as JSON: same types all the way down (True is not 1, 1 is not 1.0, -0.0 is not 0.0)."""
    if type(stored) is not type(new):
        return False
    if isinstance(stored, dict):
        return stored.keys() == new.keys() and all(strict_equal(v, new[k]) for k, v in stored.items())
    if isinstance(stored, list):
        return len(stored) == len(new) and all(map(strict_equal, stored, new))
    if isinstance(stored, float):
        return repr(stored) == repr(new)
    return bool(stored == new)


def spans(segments: list[Segment], length: int) -> list[tuple[int, int, int]]:
    """(run, first depth, last depth) of each run that holds items of a list of `length`."""
    bounds = [start for _, start in segments[1:]] + [length]
    return [(run, start, end - 1) for (run, start), end in zip(segments, bounds, strict=True) if start < end]
