"""A stored conversation as a person reads it: display items, the request that decided each tool
call, and the pages a long conversation is shown in."""

import json
from collections.abc import Iterable
from dataclasses import dataclass
from typing import Any

from django.db.backends.base.base import BaseDatabaseWrapper
from django.db.models import BooleanField, F, Func, Q, QuerySet
from django.db.models.sql.compiler import SQLCompiler

from approvals.models import RAN, ApprovalRequest
from checkpoints.diff import json_object


@dataclass(frozen=True)
class ConversationItem:
    """One message as a person reads it."""

    role: str
    content: str
    tool_calls: list[dict[str, Any]]
    tool_call_id: str = ""
    tool_name: str = ""
    result: str = ""
    """A tool's result that is a JSON object, one field per line like a call's arguments."""


def conversation(
    values: dict[str, Any],
    *,
    requests: list[ApprovalRequest] = (),  # type: ignore[assignment]
    shown: slice = slice(None),
) -> list[ConversationItem]:
    """Turn stored messages (those `shown`, all by default) into display items: tool calls with
    parsed arguments, their names, and the human decision on each gated call (with the arguments
    it ran with, if edited). Calls pair with requests over the whole conversation, so a page of
    it pairs as the whole would."""
    messages = values.get("messages", [])
    by_call = requests_by_call(messages, requests=list(requests))
    start, end, _ = shown.indices(len(messages))
    names: dict[str, str] = {}
    items = []
    for index, message in enumerate(messages[:end]):
        for call in message.get("tool_calls") or []:
            names[call.get("id", "")] = call.get("function", {}).get("name", "")
        if index >= start:
            items.append(_conversation_item(message, by_call=by_call, names=names))
    return items


def _conversation_item(
    message: dict[str, Any], *, by_call: dict[str, ApprovalRequest], names: dict[str, str]
) -> ConversationItem:
    calls = []
    for call in message.get("tool_calls") or []:
        function = call.get("function", {})
        request_ = by_call.get(call.get("id", ""))
        args, proposed = _pretty(function.get("arguments")), ""
        if request_ is not None and request_.status in RAN and request_.decision_args is not None:
            # What ran is the reviewer's edit, as the ledger has it; the message may hold the proposal.
            written = _parsed(function.get("arguments"))
            args = _pretty(_ordered_like(request_.decision_args, written))
            proposed = _pretty(_ordered_like(request_.args, written))
        calls.append(
            {
                "id": call.get("id"),
                "name": function.get("name"),
                "args": args,
                "proposed": proposed if proposed != args else "",
                "edited": bool(call.get("edited")),
                "request": request_,
            }
        )
    return ConversationItem(
        role=message.get("role", ""),
        content=message.get("content") or "",
        tool_calls=calls,
        tool_call_id=message.get("tool_call_id", ""),
        tool_name=names.get(message.get("tool_call_id", ""), ""),
        result=_object_result(message),
    )


def tool_calls(messages: list[dict[str, Any]]) -> list[dict[str, Any]]:
    """Every tool call of the messages, in order."""
    return [c for m in messages for c in m.get("tool_calls") or [] if isinstance(c, dict)]


def requests_by_call(
    messages: list[dict[str, Any]], *, requests: list[ApprovalRequest]
) -> dict[str, ApprovalRequest]:
    """The request that decided each tool call, by the call's id (the newest, when one was asked
    again). A request's key is its call's id, except where an adapter keys its gates otherwise
    (LangGraph: an interrupt's id and index): such a request answers the first call not yet
    answered that has its action and proposed arguments, as the adapter matched them."""
    calls = tool_calls(messages)
    ids = {c.get("id") for c in calls}
    found = {r.key: r for r in requests if r.key in ids}
    replaced = {r.supersedes_id for r in requests}
    others = [r for r in requests if r.key not in ids and r.pk not in replaced]
    for call in calls:
        if call.get("id") in found or not others:
            continue
        function = call.get("function", {})
        name, args = function.get("name"), _parsed(function.get("arguments"))
        match = next((r for r in others if r.action == name and r.args == args), None)
        if match is not None:
            others.remove(match)
            found[call.get("id", "")] = match
    return found


def _ordered_like(value: Any, written: Any) -> Any:
    """An object with its fields in the order the agent wrote the call's (the database keeps
    them sorted), any others after."""
    if not (isinstance(value, dict) and isinstance(written, dict)):
        return value
    return {k: value[k] for k in written if k in value} | value


def _parsed(raw: Any) -> Any:
    try:
        return json.loads(raw) if isinstance(raw, str) else raw
    except ValueError:
        return raw


def _object_result(message: dict[str, Any]) -> str:
    """A tool message whose content is a JSON object (OpenAI's format keeps a result as text),
    shown as its fields; any other content is shown as written."""
    content = message.get("content")
    if message.get("role") != "tool" or not isinstance(content, str) or not content.startswith("{"):
        return ""
    value = json_object(content)
    return _pretty(value) if value else ""


def _pretty(raw: Any) -> str:
    """A call's arguments one per line, text as written (an email body keeps its line breaks
    instead of showing JSON's \\n); anything that is not an object stays JSON."""
    try:
        value = json.loads(raw) if isinstance(raw, str) else raw
    except (TypeError, ValueError):
        return str(raw)
    if not isinstance(value, dict):
        return json.dumps(value, indent=2, ensure_ascii=False)
    lines = []
    for key, item in value.items():
        if isinstance(item, str) and "\n" in item:
            lines.append(f"{key}:\n  " + item.replace("\n", "\n  "))
        else:
            lines.append(f"{key}: {item if isinstance(item, str) else json.dumps(item, ensure_ascii=False)}")
    return "\n".join(lines)


CONVERSATION_PAGE = 100
"""Messages a thread page shows at a time: a page pushed live on every step stays small."""


class NoSuchMessages(ValueError):
    """A page of the conversation the thread's head does not have."""


def conversation_page(total: int, *, before: str | None) -> slice:
    """The CONVERSATION_PAGE messages before position `before` (a query parameter: the newest
    when None). Raises NoSuchMessages unless it is a whole number from 1 to `total`."""
    if before is None:
        return slice(max(0, total - CONVERSATION_PAGE), total)
    # ASCII digits only ("²" is a digit int() refuses), and few.
    if not (before.isascii() and before.isdecimal() and len(before) < 10 and 1 <= int(before) <= total):
        raise NoSuchMessages(f"This conversation has no messages before {before[:20]!r}.")
    end = int(before)
    return slice(max(0, end - CONVERSATION_PAGE), end)


class OneOf(Func):
    """`field IN values`, the values bound as one parameter (a Postgres array; JSON that SQLite
    reads with json_each), so a thread of any length fits the databases' limits (SQLite's 32,766
    parameters a statement, Postgres' 65,535)."""

    conditional = True
    output_field = BooleanField()

    def __init__(self, field: str, values: Iterable[Any]) -> None:
        super().__init__(F(field))
        self.values = sorted({v for v in values if isinstance(v, str)})  # a call without an id has none

    def as_sql(  # type: ignore[override]
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any
    ) -> tuple[str, tuple[Any, ...]]:
        column, params = compiler.compile(self.source_expressions[0])
        return f"({column} = ANY(%s))", (*params, self.values)

    def as_sqlite(
        self, compiler: SQLCompiler, connection: BaseDatabaseWrapper, **extra: Any
    ) -> tuple[str, tuple[Any, ...]]:
        column, params = compiler.compile(self.source_expressions[0])
        return f"({column} IN (SELECT value FROM json_each(%s)))", (*params, json.dumps(self.values))


def requests_shown(
    requests: QuerySet[ApprovalRequest], messages: list[dict[str, Any]], *, shown: Iterable[slice]
) -> list[ApprovalRequest]:
    """The requests that may answer the calls of the `shown` parts of the messages, oldest first,
    in one query: those keyed by the calls' ids, and those of the calls' tools an adapter keyed
    otherwise (by no call's id), which requests_by_call pairs in order over the whole conversation."""
    calls = [c for part in shown for c in tool_calls(messages[part])]
    if not calls:
        return []
    every = (c.get("id") for c in tool_calls(messages))
    tools = {c.get("function", {}).get("name") for c in calls}
    wanted = Q(OneOf("key", (c.get("id") for c in calls))) | (Q(action__in=tools) & ~OneOf("key", every))
    return list(requests.filter(wanted).order_by("created_at", "id"))


def shown_conversation(
    values: dict[str, Any], *, requests: QuerySet[ApprovalRequest], shown: slice
) -> list[ConversationItem]:
    """The `shown` messages as display items, reading of `requests` only those they need."""
    [items] = shown_conversations(values, requests=requests, shown=[shown])
    return items


def shown_conversations(
    values: dict[str, Any], *, requests: QuerySet[ApprovalRequest], shown: list[slice]
) -> list[list[ConversationItem]]:
    """Each of the `shown` parts of the messages as display items, reading of `requests` only
    those they need, in one query. A request another part needed pairs with no call of this one
    (by id, or by the tool an adapter keyed it under, whose requests every part reads alike)."""
    messages = values.get("messages", [])
    needed = requests_shown(requests, messages, shown=shown)
    return [conversation(values, requests=needed, shown=part) for part in shown]


def gate_message(messages: list[dict[str, Any]], *, request_: ApprovalRequest) -> int | None:
    """The position of the message carrying the request's call, in the conversation at its gate:
    the call whose id is its key, else (an adapter keyed it otherwise) the newest call of its tool."""
    for index in range(len(messages) - 1, -1, -1):
        if any(c.get("id") == request_.key for c in tool_calls(messages[index : index + 1])):
            return index
    for index in range(len(messages) - 1, -1, -1):
        if any(
            c.get("function", {}).get("name") == request_.action
            for c in tool_calls(messages[index : index + 1])
        ):
            return index
    return None
