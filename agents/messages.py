"""The shape of stored chat messages (OpenAI's), checked when a person writes a state.

The model's own replies always have it; an operator's edit or a fork might not, and a tool call
without an id or a function name, or two calls sharing an id, would break the step or the gates
that run on that state. Extra keys (our `id`, `edited_by`, ...) are allowed.
"""

from typing import Any

import pydantic

Lenient = pydantic.ConfigDict(extra="allow")


class FunctionCall(pydantic.BaseModel):
    model_config = Lenient

    name: str = pydantic.Field(min_length=1)
    arguments: str = "{}"
    """The JSON text of the arguments, as the model writes it."""


class ToolCall(pydantic.BaseModel):
    model_config = Lenient

    id: str = pydantic.Field(min_length=1, max_length=200)
    type: str = "function"
    function: FunctionCall


class Message(pydantic.BaseModel):
    model_config = Lenient

    role: str = pydantic.Field(min_length=1)
    tool_calls: list[ToolCall] | None = None
    tool_call_id: str | None = None

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
