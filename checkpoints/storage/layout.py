"""A checkpoint's values as stored: one reference per field, and the rows a write adds.

- A list field is a chain of rows, one per item, each keyed by the chain digest up to it
  (`prev` links it to the row before; run and depth let a reader range-scan it). Appending
  to the parent's list adds only new rows.
- Any other field is content-addressed: one row keyed by the SHA-256 of its canonical JSON,
  written once and shared by every checkpoint of the thread that holds the same value.
- A small value (a counter, a flag) is kept inline in the checkpoint row, unless values are
  encrypted: a 32-byte address to a 2-byte value would cost more than the value.
"""

import json
from dataclasses import dataclass, field
from typing import Any

from checkpoints.digest import canonical_json, encode_digest, row_key, sha256
from checkpoints.storage.crypto import Sealer
from checkpoints.storage.lists import ListState, Segment, grow

INLINE_MAX = 40
"""Largest canonical JSON (bytes) kept inline in the checkpoint row when not encrypting."""

INLINE, VALUE, LIST = "i", "v", "l"


@dataclass(frozen=True)
class Row:
    """One stored value: a field's value, or one list item."""

    key: bytes
    """digest.row_key of the value's digest, or of the list's chain digest up to the item."""
    prev: bytes | None
    data: str
    """Canonical JSON, or its Fernet token when encrypting."""
    run: int | None = None
    depth: int | None = None
    """For a list item: its run, and its index in the list."""


@dataclass(frozen=True)
class FieldRef:
    """Where one field's value lives, and its digest."""

    kind: str
    """INLINE, VALUE or LIST."""
    digest: bytes
    """SHA-256 of the canonical JSON, or for a list its chain digest (its last row's key)."""
    size: int = 0
    """Bytes of the field's canonical JSON."""
    inline: Any = None
    length: int = 0
    """Items, for a list."""
    segments: tuple[Segment, ...] = ()
    """For a list: its runs (see lists.ListState.segments)."""

    def to_json(self) -> list[Any]:
        """The form kept in the checkpoint row."""
        if self.kind == INLINE:
            return [INLINE, self.inline]
        if self.kind == VALUE:
            return [VALUE, encode_digest(self.digest)]
        return [LIST, encode_digest(self.digest), self.length, [list(s) for s in self.segments]]

    def digest_json(self) -> Any:
        """What this field contributes to the checkpoint digest (see digest.field_digest).
        Runs are left out: they only help reading, the chain is the truth."""
        digest = encode_digest(self.digest)
        return [digest, self.length] if self.kind == LIST else digest

    @property
    def row_key(self) -> bytes | None:
        """The row to start reading from; None when nothing is stored outside the checkpoint."""
        if self.kind == VALUE or (self.kind == LIST and self.length):
            return self.digest
        return None


@dataclass
class Layout:
    """What a writer needs to know about a stored checkpoint to write its child cheaply."""

    checkpoint_id: str
    thread_id: str
    step: int
    refs: dict[str, FieldRef]
    lists: dict[str, ListState] = field(default_factory=dict)

    @property
    def weight(self) -> int:
        """Rough bytes held in memory, for the cache's budget."""
        return 512 + sum(ref.size for ref in self.refs.values())


@dataclass(frozen=True)
class Plan:
    """A write, planned against its parent: the new field references and the rows to add."""

    refs: dict[str, FieldRef]
    lists: dict[str, ListState]
    rows: list[Row]

    @property
    def fields_json(self) -> dict[str, Any]:
        return {name: ref.to_json() for name, ref in self.refs.items()}

    @property
    def digest_fields(self) -> dict[str, Any]:
        return {name: ref.digest_json() for name, ref in self.refs.items()}

    @property
    def size_bytes(self) -> int:
        return state_size(self.refs)


def plan_write(
    values: dict[str, Any], *, parent: Layout | None, sealer: Sealer, branch: bool = False
) -> Plan:
    """Plan storing `values` under `parent`: only what the parent does not already hold is new.
    `branch` says the parent is not the thread's head (a fork): its lists' appends start new runs."""
    refs: dict[str, FieldRef] = {}
    lists: dict[str, ListState] = {}
    rows: dict[bytes, Row] = {}
    for name, value in values.items():
        if isinstance(value, list):
            state, added = grow(parent.lists.get(name) if parent else None, value, branch=branch)
            lists[name] = state
            refs[name] = list_ref(state)
            rows.update((i.key, Row(i.key, i.prev, sealer.seal(i.plain), i.run, i.depth)) for i in added)
            continue
        plain = canonical_json(value)
        encoded = plain.encode()
        digest = sha256(encoded)
        if len(encoded) <= INLINE_MAX and not sealer.encrypts:
            # A decoded copy: the caller may mutate `value` after the write.
            refs[name] = FieldRef(INLINE, digest, len(encoded), inline=json.loads(plain))
            continue
        refs[name] = FieldRef(VALUE, digest, len(encoded))
        held = parent.refs.get(name) if parent else None
        if held is None or held.kind != VALUE or held.digest != digest:
            rows[row_key(digest)] = Row(row_key(digest), None, sealer.seal(plain))
    return Plan(refs=refs, lists=lists, rows=list(rows.values()))


def list_ref(state: ListState) -> FieldRef:
    return FieldRef(LIST, state.digest, state.size, length=state.length, segments=tuple(state.segments))


def state_size(refs: dict[str, FieldRef]) -> int:
    """Bytes of the whole state's canonical JSON, from the fields' sizes (no serializing)."""
    names = sum(len(canonical_json(name).encode()) + 1 for name in refs)
    return 2 + names + sum(ref.size for ref in refs.values()) + max(len(refs) - 1, 0)
