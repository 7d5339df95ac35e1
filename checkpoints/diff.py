"""Readable differences between two states: what was added, removed or changed, and where."""

import json
import re
from dataclasses import dataclass, replace
from typing import Any

from deepdiff import DeepDiff

_KINDS = {
    "dictionary_item_added": "added",
    "iterable_item_added": "added",
    "dictionary_item_removed": "removed",
    "iterable_item_removed": "removed",
    "values_changed": "changed",
    "type_changes": "changed",
}
_ROOT = re.compile(r"^root")
_KEY = re.compile(r"\['([^']*)'\]")


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
        return _text(self.old)

    @property
    def new_text(self) -> str:
        return _text(self.new)


def diff_values(old: dict[str, Any], new: dict[str, Any]) -> list[Change]:
    """List the changes from old to new, in path order. A call's arguments or a tool's result
    that changed names the fields that changed inside it (`...arguments.amount_cents`)."""
    changes = [inner for change in _changes(old, new) for inner in _within_encoded(change, old)]
    return sorted(changes, key=lambda c: _sort_key(c.path))


def _changes(old: Any, new: Any) -> list[Change]:
    report = DeepDiff(old, new, verbose_level=2, view="text")
    return [
        _change(kind, _path(path), detail)
        for key, kind in _KINDS.items()
        for path, detail in report.get(key, {}).items()
    ]


_ARGUMENTS = re.compile(r"\.function\.arguments$")
_CONTENT = re.compile(r"^messages\[(\d+)\]\.content$")


def _within_encoded(change: Change, old: dict[str, Any]) -> list[Change]:
    """OpenAI's format keeps a call's arguments and a tool's result as JSON text; when both
    sides are JSON objects, the change is the fields that differ inside them, each with its
    path below the text's. Text that is not an object, or that differs only in its spelling
    (spacing, key order), stays one change of the text."""
    if change.kind != "changed" or not (_ARGUMENTS.search(change.path) or _is_tool_result(change.path, old)):
        return [change]
    before, after = json_object(change.old), json_object(change.new)
    inner = _changes(before, after) if before is not None and after is not None else []
    return [replace(c, path=f"{change.path}.{c.path}") for c in inner] or [change]


def _is_tool_result(path: str, values: dict[str, Any]) -> bool:
    match = _CONTENT.match(path)
    messages = values.get("messages")
    if not match or not isinstance(messages, list) or int(match[1]) >= len(messages):
        return False
    message = messages[int(match[1])]
    return isinstance(message, dict) and message.get("role") == "tool"


def _change(kind: str, path: str, detail: Any) -> Change:
    if kind == "changed":
        return Change(kind, path, detail.get("old_value"), detail.get("new_value"))
    return Change(kind, path, None, detail) if kind == "added" else Change(kind, path, detail, None)


def _path(deepdiff_path: str) -> str:
    return _KEY.sub(r".\1", _ROOT.sub("", deepdiff_path)).lstrip(".")


def _sort_key(path: str) -> list[Any]:
    return [int(p) if p.isdigit() else p for p in re.split(r"[.\[\]]+", path) if p]


def _text(value: Any) -> str:
    if value is None:
        return ""
    if isinstance(value, str):
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
    encoded = ["arguments", *(["content"] if value.get("role") == "tool" else [])]
    for key in encoded:
        decoded = json_object(value.get(key))
        if decoded is not None:
            shown[key] = decoded
    return shown


def json_object(text: Any) -> dict[str, Any] | None:
    """The object a JSON string encodes (a tool call's arguments, a tool's result), else None."""
    if not isinstance(text, str):
        return None
    try:
        decoded = json.loads(text)
    except ValueError:
        return None
    return decoded if isinstance(decoded, dict) else None


def summary(changes: list[Change]) -> dict[str, Any]:
    """A compact, JSON-ready form for the audit ledger."""
    return {"changes": [{"kind": c.kind, "path": c.path, "old": c.old, "new": c.new} for c in changes][:200]}
