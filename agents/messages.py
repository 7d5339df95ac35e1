"""The shape of stored chat messages (OpenAI's), checked when a person writes a state.

The model's replies are given it (llm.distinct_ids); an operator's edit or a fork might not have
it, and a tool call without an id or a function name, two calls sharing an id, or an id too long
to key a gate would break the step or the gates that run on that state; a role or content the
chat API refuses would fail the next step in the worker (an HTTP 400 from the model's API) after
the edit was accepted. Extra keys (our `id`, `edited_by`, ...) are allowed.
"""

import hashlib
from collections.abc import Collection
from typing import Any

import pydantic
from pydantic_core import PydanticCustomError

from checkpoints.storable_text import text_problem

Lenient = pydantic.ConfigDict(extra="allow")


class FunctionCall(pydantic.BaseModel):
    model_config = Lenient

    name: str = pydantic.Field(min_length=1)
    arguments: str = "{}"
    """The JSON text of the arguments, as the model writes it."""


MAX_CALL_ID_CHARS = 191
"""A call id is its gate's key, stored with a prefix ("decision:", "result:") in a 200-character
column (checkpoints' pending writes): a longer one would make its decision fail to record."""


def distinct_call_ids(ids: list[Any], *, used: Collection[str] = ()) -> list[str]:
    """`ids`, a model reply's tool call ids in order, each made one a gate can key. The model
    (which a prompt can steer) chooses them; one empty, not text, too long to store, repeated in
    the reply or `used` earlier in the run would make its gate fail to open or its decision fail
    to record (and a framework refuses it). Such an id is replaced deterministically, so a
    replayed step sees the same ids; the history the model reads back uses the new one."""
    kept = {i for i in ids if _storable(i)}
    taken = set(used)
    distinct = []
    for position, call_id in enumerate(ids):
        if not _storable(call_id) or call_id in taken:
            seed = f"{position}:{call_id}"
            while True:  # a hostile model may have picked the replacement as another call's id
                # surrogatepass: a lone surrogate encodes (a valid id's seed is as before).
                seed = hashlib.sha256(seed.encode(errors="surrogatepass")).hexdigest()
                call_id = f"call_{position}_{seed[:20]}"
                if call_id not in kept and call_id not in taken:
                    break
        taken.add(call_id)
        distinct.append(call_id)
    return distinct


def _storable(call_id: Any) -> bool:
    return isinstance(call_id, str) and 0 < len(call_id) <= MAX_CALL_ID_CHARS and not text_problem(call_id)


class ToolCall(pydantic.BaseModel):
    model_config = Lenient

    id: str = pydantic.Field(min_length=1, max_length=MAX_CALL_ID_CHARS)
    type: str = "function"
    function: FunctionCall


ROLES = ("system", "developer", "user", "assistant", "tool")  # what Chat Completions accepts


class Message(pydantic.BaseModel):
    model_config = Lenient

    role: str
    content: Any = None
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

    @pydantic.field_validator("role", mode="before")
    @classmethod
    def chat_role(cls, role: Any) -> str:
        if role not in ROLES:
            raise PydanticCustomError("role", "must be one of: " + ", ".join(ROLES))
        return str(role)

    @pydantic.field_validator("content", mode="before")
    @classmethod
    def chat_content(cls, content: Any) -> Any:
        # Text, or the API's list of content parts ({"type": "text", "text": ...}), or none.
        if content is None or isinstance(content, str):
            return content
        if isinstance(content, list) and all(isinstance(part, dict) for part in content):
            return content
        raise PydanticCustomError("content", "must be text, a list of content parts (JSON objects), or null")

    @pydantic.field_validator("tool_calls")
    @classmethod
    def ids_unique(cls, calls: list[ToolCall] | None) -> list[ToolCall] | None:
        ids = [c.id for c in calls or []]
        if len(set(ids)) != len(ids):
            raise ValueError("two tool calls share one id; each call needs its own")
        return calls


MESSAGES = pydantic.TypeAdapter(list[Message])


def message_errors(messages: Any, *, field: str = "messages") -> dict[str, str]:
    """Field errors for a list of messages not in the stored shape ({} when it is)."""
    try:
        MESSAGES.validate_python(messages)
    except pydantic.ValidationError as exc:
        return {".".join([field, *(str(p) for p in e["loc"])]): e["msg"] for e in exc.errors()}
    return {}
