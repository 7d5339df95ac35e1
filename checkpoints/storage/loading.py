"""Read a checkpoint's values back from its field references and stored rows, checking every byte."""

import hashlib
import json
from collections.abc import Mapping
from dataclasses import dataclass
from itertools import accumulate
from typing import Any

from checkpoints.digest import LIST_SEED, canonical_json, decode_digest, row_key, sha256
from checkpoints.storage.crypto import Sealer, SealError
from checkpoints.storage.layout import INLINE, LIST, VALUE, FieldRef
from checkpoints.storage.lists import ListState, spans

StoredRows = Mapping[bytes, tuple[bytes | None, str]]
"""Rows read for a checkpoint: key -> (prev, data)."""


class Tampered(Exception):
    """Stored data does not match its digest, or fails decryption."""


class MissingRow(Tampered):
    """A row the references lead to was not among those read (a reader may look wider)."""


@dataclass(frozen=True)
class Wanted:
    """The rows a checkpoint's references need."""

    keys: list[bytes]
    """Stored values, and list tails (where a full walk starts)."""
    spans: list[tuple[int, int, int]]
    """(run, first depth, last depth) ranges holding list items."""


def wanted(refs: dict[str, Any]) -> Wanted:
    keys: list[bytes] = []
    ranges: list[tuple[int, int, int]] = []
    for ref in refs.values():
        try:
            if ref[0] == VALUE or (ref[0] == LIST and ref[2]):
                keys.append(row_key(decode_digest(ref[1])))
            if ref[0] == LIST:
                ranges += spans([(int(run), int(start)) for run, start in ref[3]], int(ref[2]))
        except (TypeError, ValueError, IndexError):
            continue  # load_values reports it, naming the checkpoint
    return Wanted(keys=keys, spans=ranges)


def row_keys(refs: dict[str, Any]) -> list[bytes]:
    """The rows a checkpoint's references start from (list tails and stored values)."""
    return wanted(refs).keys


def load_values(
    refs: dict[str, Any], rows: StoredRows, *, sealer: Sealer
) -> tuple[dict[str, Any], dict[str, FieldRef], dict[str, ListState]]:
    """Decode every field, checking each against its digest; raise Tampered on any mismatch."""
    values: dict[str, Any] = {}
    fields: dict[str, FieldRef] = {}
    lists: dict[str, ListState] = {}
    try:
        for name, ref in refs.items():
            values[name], fields[name], state = _load_field(ref, rows, sealer)
            if state is not None:
                lists[name] = state
    except (TypeError, ValueError, IndexError, SealError) as exc:
        raise Tampered(str(exc)) from exc
    return values, fields, lists


def _load_field(ref: list[Any], rows: StoredRows, sealer: Sealer) -> tuple[Any, FieldRef, ListState | None]:
    if ref[0] == INLINE:
        encoded = canonical_json(ref[1]).encode()
        return ref[1], FieldRef(INLINE, sha256(encoded), len(encoded), inline=ref[1]), None
    if ref[0] == VALUE:
        key = decode_digest(ref[1])
        plain = _open(rows, row_key(key), sealer)[1]
        encoded = plain.encode()
        if sha256(encoded) != key:
            raise Tampered("a stored value does not match its digest")
        return json.loads(plain), FieldRef(VALUE, key, len(encoded)), None
    if ref[0] == LIST:
        segments = [(int(run), int(start)) for run, start in ref[3]]
        state = _read_list(rows, tail=decode_digest(ref[1]), length=int(ref[2]), sealer=sealer)
        state.segments = segments
        value = json.loads("[" + ",".join(state.raw or []) + "]")
        return (
            value,
            FieldRef(LIST, state.digest, state.size, length=state.length, segments=tuple(segments)),
            state,
        )
    raise Tampered(f"unknown reference {ref[0]!r}")


def _open(rows: StoredRows, key: bytes, sealer: Sealer) -> tuple[bytes | None, str]:
    try:
        prev, data = rows[key]
    except KeyError as exc:
        raise MissingRow(key.hex()) from exc
    return prev, sealer.open(data)


def _read_list(rows: StoredRows, *, tail: bytes, length: int, sealer: Sealer) -> ListState:
    """Follow prev links from the tail, then recompute the chain from the items' bytes."""
    stored: list[str] = []
    key: bytes | None = row_key(tail) if length else None
    try:
        while key is not None:
            if len(stored) == length:
                raise Tampered("the list is longer than recorded")
            key, data = rows[key]
            stored.append(data)
    except KeyError as exc:
        raise MissingRow(str(exc)) from exc
    stored.reverse()
    plains = sealer.open_all(stored)
    encoded = [plain.encode() for plain in plains]
    keys, digest, hash_ = [], LIST_SEED, hashlib.sha256  # inlined chain(): this loop is the load's hot path
    for item in encoded:
        digest = hash_(digest + item).digest()
        keys.append(digest)
    if len(plains) != length or (keys and keys[-1] != tail):
        raise Tampered("the list does not match its chain digest")
    return ListState(keys=keys, ends=list(accumulate(map(len, encoded))), raw=plains)
