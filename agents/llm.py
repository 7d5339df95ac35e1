"""The model client: the only module that imports openai.

Any OpenAI-compatible server works (OPENAI_BASE_URL, OPENAI_API_KEY, OPENAI_MODEL). With no
key, requests go to the built-in offline model served by this app, over real HTTP.
"""

import itertools
import re
import threading
from dataclasses import dataclass
from functools import cache
from typing import Any

import httpx2
import openai
from django.conf import settings

from agents.messages import distinct_call_ids
from checkpoints import json_text
from checkpoints.storable_text import first_problem

# Keys the Chat Completions API accepts on a message; ours carry extras (id, edited_by, ...).
_MESSAGE_KEYS = {"role", "content", "tool_calls", "tool_call_id", "name"}


class ModelUnavailable(Exception):
    """The model could not be reached or answered with a server error; the step may be retried."""


class MalformedReply(Exception):
    """The server answered, but not with a Chat Completions response; the step fails."""


TRANSIENT = (
    openai.APIConnectionError,
    openai.APITimeoutError,
    openai.InternalServerError,
    openai.RateLimitError,
)
"""The client's errors that a retry of the step may not meet again."""


@dataclass(frozen=True)
class ToolCall:
    id: str
    name: str
    arguments: str
    """The raw JSON string the model produced (it may be invalid)."""

    @classmethod
    def of(cls, call: dict[str, Any]) -> "ToolCall":
        """A call in the API's shape, as a reply carries it and an assistant message stores it."""
        function = call["function"]
        return cls(id=call["id"], name=function["name"], arguments=function.get("arguments") or "{}")


@dataclass(frozen=True)
class ModelReply:
    content: str | None
    tool_calls: list[ToolCall]
    model: str


def is_offline() -> bool:
    return bool(settings.OFFLINE_MODEL)


CLIENTS_PER_PROCESS = 8
"""A connection pool walks all its connections whenever a request starts or ends (httpcore): one
pool for a worker's 300 steps in flight cost about a tenth of its CPU. Each thread keeps one of
a few clients, so a pool holds a few dozen connections."""


@cache
def _clients(base_url: str, api_key: str, timeout: float) -> tuple[openai.OpenAI, ...]:
    # All at once, at the process's first model call, while that call's thread and every other
    # thread's first call wait: built one by one as threads first asked, a burst of resumed steps
    # queued behind each build. They share one TLS context, the SDK's default one: building it
    # is nearly all of a client's cost (about 25 ms of CPU, its certificates read and parsed).
    # Retries are the task's job (with backoff, visible in the thread); keep the SDK's short.
    tls = httpx2.create_ssl_context()
    return tuple(
        openai.OpenAI(
            base_url=base_url,
            api_key=api_key,
            timeout=timeout,
            max_retries=1,
            http_client=openai.DefaultHttpxClient(verify=tls),
        )
        for _ in range(CLIENTS_PER_PROCESS)
    )


# A thread-pool worker's first 100 steps ask at once; without the lock each would build them.
_client_lock = threading.Lock()
_shards = itertools.count()
_thread = threading.local()


def client() -> openai.OpenAI:
    """This thread's model client: one of CLIENTS_PER_PROCESS, handed out in turn."""
    shard = getattr(_thread, "shard", None)
    if shard is None:
        shard = _thread.shard = next(_shards) % CLIENTS_PER_PROCESS
    with _client_lock:
        clients = _clients(
            settings.OPENAI_BASE_URL, settings.OPENAI_API_KEY or "offline", settings.OPENAI_TIMEOUT_S
        )
    return clients[shard]


def to_api_message(message: dict[str, Any]) -> dict[str, Any]:
    """Strip our bookkeeping keys so any OpenAI-compatible server accepts the message."""
    clean = {k: v for k, v in message.items() if k in _MESSAGE_KEYS and v is not None}
    if "tool_calls" in clean:
        clean["tool_calls"] = [
            {"id": c["id"], "type": c.get("type", "function"), "function": c["function"]}
            for c in clean["tool_calls"]
        ]
    return clean


def complete(*, messages: list[dict[str, Any]], tools: list[dict[str, Any]]) -> ModelReply:
    """Ask the model for the next assistant message."""
    body = {
        "model": settings.OPENAI_MODEL,
        "messages": [to_api_message(m) for m in messages],
        **({"tools": tools} if tools else {}),
    }
    try:
        # The SDK's public `post`, as `chat.completions.create` sends it but without create()'s
        # walk of every message against its TypedDicts (2 ms of CPU at four messages, growing
        # with the conversation) and, with cast_to=object, without building its ChatCompletion
        # models from the reply (a quarter of the call's CPU): we read the reply's four fields.
        data = client().post(
            "/chat/completions", body=body, cast_to=object, options={"headers": offline_headers()}
        )
    except TRANSIENT as exc:
        raise ModelUnavailable(f"model unavailable at {settings.OPENAI_BASE_URL}: {exc}") from exc
    return reply_from(data)


def reply_from(data: Any) -> ModelReply:
    """The reply in a Chat Completions response; raises MalformedReply if it is not one."""
    try:
        message = data["choices"][0]["message"]
        calls = [
            storable_call(ToolCall.of(c))
            for c in message.get("tool_calls") or []
            if c.get("type", "function") == "function"
        ]
        return ModelReply(
            content=storable(message.get("content")),
            tool_calls=distinct_ids(calls),
            model=storable(str(data.get("model", ""))),
        )
    except (KeyError, IndexError, TypeError, AttributeError) as exc:
        raise MalformedReply(
            f"the model's reply is not a chat completion ({type(exc).__name__}: {exc})"
        ) from exc


SURROGATE = re.compile("[\ud800-\udfff]")
"""A lone UTF-16 surrogate: JSON's "\\ud800" parses into one, and no column can store it (it
has no UTF-8 encoding). A model, which a prompt can steer, may write it anywhere in a reply."""


def storable(value: Any) -> Any:
    """The model's text (or JSON value) with each lone surrogate replaced by U+FFFD: the step
    keeps what the model said rather than failing to store it."""
    if isinstance(value, str):
        return SURROGATE.sub("\ufffd", value)
    if isinstance(value, list):
        return [storable(item) for item in value]
    if isinstance(value, dict):
        return {storable(key): storable(item) for key, item in value.items()}
    return value


def storable_call(call: ToolCall) -> ToolCall:
    """The call with text a checkpoint can store. Its arguments keep a surrogate as JSON's
    escape for it, which means the same inside a JSON string: the tool then refuses them
    (Tool.validate_args), saying why, as it refuses any it cannot take, and no gate opens.
    An id is left to distinct_ids, which replaces one a gate cannot key."""
    arguments = call.arguments
    if isinstance(arguments, str):
        arguments = SURROGATE.sub(lambda found: f"\\u{ord(found.group()):04x}", arguments)
    name = storable(call.name)
    if (name, arguments) == (call.name, call.arguments):
        return call
    return ToolCall(id=call.id, name=name, arguments=arguments)


def distinct_ids(calls: list[ToolCall]) -> list[ToolCall]:
    """The calls, each with an id of its own that a gate can key (messages.distinct_call_ids)."""
    ids = distinct_call_ids([call.id for call in calls])
    return [
        call if call.id == call_id else ToolCall(id=call_id, name=call.name, arguments=call.arguments)
        for call, call_id in zip(calls, ids, strict=True)
    ]


def offline_headers() -> dict[str, str]:
    """The headers that carry this process's model delay to the offline model."""
    # The delay is set where the agent runs (a slow worker in a fault test); the offline
    # server honours it per request.
    if is_offline() and settings.OFFLINE_MODEL_DELAY_MS > 0:
        from agents.offline.server import DELAY_HEADER, signed_delay

        return {DELAY_HEADER: signed_delay(settings.OFFLINE_MODEL_DELAY_MS)}
    return {}


def assistant_message(reply: ModelReply, *, message_id: str) -> dict[str, Any]:
    """Store a reply in the OpenAI message shape, with our id."""
    message: dict[str, Any] = {"id": message_id, "role": "assistant", "content": reply.content}
    if reply.tool_calls:
        message["tool_calls"] = [
            {"id": c.id, "type": "function", "function": {"name": c.name, "arguments": c.arguments}}
            for c in reply.tool_calls
        ]
    return message


def parse_arguments(raw: str) -> Any:
    """A call's arguments, or the text itself where it is not JSON Gatehouse can read (its tool
    then refuses it, saying why)."""
    try:
        parsed = json_text.loads(raw or "{}")
    except ValueError:  # malformed, too deep, NaN, an endless integer
        return raw
    # A lone surrogate or a NUL: a gate or a tool message holding it could not be stored.
    return raw if first_problem(parsed, "arguments") else parsed
