"""Readable differences between two states: what was added, removed or changed, and where."""

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from deepdiff import DeepDiff

from checkpoints import json_text

_KINDS = {
    "dictionary_item_added": "added",
    "iterable_item_added": "added",
    "dictionary_item_removed": "removed",
    "iterable_item_removed": "removed",
    "values_changed": "changed",
    "type_changes": "changed",
}


@dataclass(frozen=True)
class Change:
    kind: str
    """added | removed | changed"""
    path: str
    """Like messages[3].content"""
    old: Any = None
    new: Any = None

    @property
    def old_text(self) -> str:
        """The value before, as shown ("" if it was added: there was none)."""
        return "" if self.kind == "added" else _text(self.old)

    @property
    def new_text(self) -> str:
        """The value after, as shown ("" if it was removed: there is none)."""
        return "" if self.kind == "removed" else _text(self.new)


def diff_values(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """List the changes from old to new, in path order. A call's arguments or a tool's result
    that changed names the fields that changed inside it (`...arguments.amount_cents`)."""
    old_kept, new_kept, places = _unshared(old, new)
    report = DeepDiff(_typed(old_kept), _typed(new_kept), view="tree")
    changes: list[Change] = []
    for key, kind in _KINDS.items():
        for level in report.get(key, []):
            # The path's elements, not DeepDiff's text of it: a key holding both quote marks
            # has no round trip through the text.
            elements = _placed(level.path(output_format="list"), places)
            changes += _within_encoded(_change(kind, level, elements), old=old, elements=elements)
    return sorted(changes, key=lambda c: _sort_key(c.path))


def _unshared(
    old: dict[str, Any], new: dict[str, Any]
) -> tuple[dict[str, Any], dict[str, Any], dict[str, list[int]]]:
    """Both states without the items a list field holds the same at the same place (a long
    conversation's messages before the last step's), and each cut list's kept places. DeepDiff
    pairs such lists' items by place and walks every pair field by field: most of a second
    for a 2,000-message conversation. Lists of plain values are left whole (DeepDiff aligns
    those by their contents, not their places)."""
    old_kept, new_kept, places = dict(old), dict(new), {}
    for key in old.keys() & new.keys():
        before, after = old[key], new[key]
        if not (isinstance(before, list) and isinstance(after, list)) or (_plain(before) and _plain(after)):
            continue
        shared = min(len(before), len(after))
        kept = [i for i in range(shared) if not _same(before[i], after[i])]
        if len(kept) == shared:
            continue
        kept += range(shared, max(len(before), len(after)))
        places[key] = kept
        old_kept[key] = [before[i] for i in kept if i < len(before)]
        new_kept[key] = [after[i] for i in kept if i < len(after)]
    return old_kept, new_kept, places


def _plain(items: list[Any]) -> bool:
    return all(isinstance(item, str | int | float | bool | None) for item in items)


def _same(a: Any, b: Any) -> bool:
    """Equal as DeepDiff sees it: 1 and 1.0 (or true) are equal to Python, a type change to it."""
    if type(a) is not type(b):
        return False
    if isinstance(a, dict):
        return a.keys() == b.keys() and all(_same(value, b[key]) for key, value in a.items())
    if isinstance(a, list):
        return len(a) == len(b) and all(map(_same, a, b))
    return bool(a == b)


def _typed(value: Any) -> Any:
    """value with each number and boolean in a list of plain values as bytes naming its type
    (b"bool:true"). DeepDiff aligns such lists by Python equality, where 1 == 1.0 == True: [0]
    to [false] was no change. Bytes are plain to DeepDiff, so it aligns them as before, and no
    state holds any (it is JSON): _untyped reads each back."""
    if isinstance(value, dict):
        return {key: _typed(item) for key, item in value.items()}
    if not isinstance(value, list):
        return value
    if not _plain(value):
        return [_typed(item) for item in value]
    return [_tag(item) if isinstance(item, int | float) else item for item in value]


def _tag(number: int | float) -> bytes:
    return f"{type(number).__name__}:{json.dumps(number)}".encode()


def _untyped(value: Any) -> Any:
    if isinstance(value, bytes):
        return json.loads(value.decode().partition(":")[2])
    if isinstance(value, dict):
        return {key: _untyped(item) for key, item in value.items()}
    if isinstance(value, list):
        return [_untyped(item) for item in value]
    return value


def _placed(elements: list[Any], places: dict[str, list[int]]) -> list[Any]:
    """A path into the cut lists as a path into the whole ones."""
    if len(elements) > 1 and elements[0] in places and isinstance(elements[1], int):
        return [elements[0], places[elements[0]][elements[1]], *elements[2:]]
    return elements


def _within_encoded(change: Change, *, old: dict[str, Any], elements: list[Any]) -> list[Change]:
    """A changed value held as JSON text (_encoded_keys), with objects on both sides, as the
    fields that differ inside them, each with its path below the text's. Text that is not an
    object, or that differs only in its spelling (spacing, key order), stays one change."""
    if change.kind != "changed" or not elements:
        return [change]
    container: Any = old
    for element in elements[:-1]:  # the path is old's too: a changed value is on both sides
        container = container[element]
    if not isinstance(container, dict) or elements[-1] not in _encoded_keys(container):
        return [change]
    before, after = json_object(change.old), json_object(change.new)
    inner = diff_values(before, after) if before is not None and after is not None else []
    return [replace(c, path=f"{change.path}.{c.path}") for c in inner] or [change]


def _change(kind: str, level: Any, elements: list[Any]) -> Change:
    """One change from a DeepDiff tree level at the path of these elements."""
    path = "".join(f"[{e}]" if isinstance(e, int) else f".{e}" for e in elements).lstrip(".")
    old, new = _untyped(level.t1), _untyped(level.t2)
    if kind == "changed":
        return Change(kind, path, old, new)
    return Change(kind, path, None, new) if kind == "added" else Change(kind, path, old, None)


def _sort_key(path: str) -> list[tuple[int, Any]]:
    """Indexes in number order, before names: a key spelled "0" beside "a" at one level (a
    tool's result may hold both) must not compare a number with a string."""
    return [(0, int(p)) if p.isdecimal() else (1, p) for p in re.split(r"[.\[\]]+", path) if p]


def _text(value: Any) -> str:
    """A string as itself; anything else as JSON, so null and "" differ from a missing value."""
    if isinstance(value, str) and value:
        return value
    return json.dumps(_readable(value), indent=2, ensure_ascii=False, sort_keys=True)


def _readable(value: Any) -> Any:
    """A tool call's arguments and a tool's result, which OpenAI's format keeps as JSON strings,
    shown as the objects they encode: {"amount_cents": 4250}, not "{\\"amount_cents\\": 4250}"."""
    if isinstance(value, list):
        return [_readable(item) for item in value]
    if not isinstance(value, dict):
        return value
    shown = {key: _readable(item) for key, item in value.items()}
    for key in _encoded_keys(value):
        decoded = json_object(value.get(key))
        if decoded is not None:
            shown[key] = decoded
    return shown


def _encoded_keys(container: dict[str, Any]) -> list[str]:
    """The keys whose values OpenAI's format keeps as JSON text: a call's arguments, a tool's result."""
    return ["arguments", *(["content"] if container.get("role") == "tool" else [])]


def json_object(text: Any) -> dict[str, Any] | None:
    """The object a JSON string encodes (a tool call's arguments, a tool's result), else None."""
    if not isinstance(text, str):
        return None
    try:
        decoded = json_text.loads(text)
    except ValueError:  # not JSON, or none Gatehouse reads (too deep: a RecursionError here)
        return None
    return decoded if isinstance(decoded, dict) else None


def summary(changes: list[Change]) -> dict[str, Any]:
    """A compact, JSON-ready form for the audit ledger."""
    return {"changes": [{"kind": c.kind, "path": c.path, "old": c.old, "new": c.new} for c in changes][:200]}
