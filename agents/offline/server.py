"""The built-in offline model: an OpenAI-compatible Chat Completions endpoint answering from rules.

A plain ASGI app that config/asgi.py routes to ahead of Django. A real model runs elsewhere and
costs this machine nothing; through Django's middleware chain and asgiref's thread per request
the simulated one cost the web server (daphne then) 5.9-6.4 ms of CPU a call, and 1.2-1.6 ms
this way (measured side by side on this 2-core machine), so benchmarks spend the cores on
Gatehouse itself."""

import asyncio
import hashlib
import json
import time
from typing import Any

from django.conf import settings
from django.core import signing

from agents.offline import rules
from checkpoints import json_text
from checkpoints.storable_text import first_problem
from config.asgi_scope import Receive, Scope, Send, header

PATH = "/offline/v1/chat/completions"
DEFAULT_MODEL = "gatehouse-offline"


class InvalidRequest(Exception):
    """The request is not a Chat Completions request we can answer."""

    def __init__(self, message: str, *, status: int = 400) -> None:
        super().__init__(message)
        self.status = status


DELAY_HEADER = "X-Gatehouse-Offline-Delay-Ms"
# The endpoint is anonymous: a delay anyone could pick would hold a connection open for
# free. A caller's delay counts only when signed with SECRET_KEY, as this installation's
# workers sign theirs (a slow worker in a fault test).
DELAY_SIGNER = signing.Signer(salt="gatehouse.offline-delay")


def signed_delay(ms: int) -> str:
    return DELAY_SIGNER.sign(str(ms))


def delay_for(header: str) -> int:
    """The server's delay, or a signed caller's (a worker with OFFLINE_MODEL_DELAY_MS) if longer."""
    try:
        asked = int(DELAY_SIGNER.unsign(header))
    except (signing.BadSignature, ValueError):
        asked = 0
    return min(max(settings.OFFLINE_MODEL_DELAY_MS, asked), settings.OFFLINE_MODEL_MAX_DELAY_MS)


async def chat_completions(scope: Scope, receive: Receive, send: Send) -> None:
    """Answer a (non-streaming) Chat Completions request; any bearer key is accepted."""
    try:
        if scope["method"] != "POST":
            raise InvalidRequest("Use POST for chat completions.", status=405)
        body = parse_request(await read_body(receive))
    except InvalidRequest as exc:
        await send_json(send, error(str(exc)), status=exc.status)
        return
    delay_ms = delay_for(header(scope, DELAY_HEADER.lower().encode()))
    if delay_ms > 0:
        await asyncio.sleep(delay_ms / 1000)  # a slow (simulated) model holds up no other request
    message = rules.reply(body["messages"], body.get("tools") or [])
    message = rules.as_json_output(message, body.get("response_format"))
    model = body.get("model")
    model = model if isinstance(model, str) else DEFAULT_MODEL
    await send_json(send, completion(message, model=model, messages=body["messages"]), status=200)


async def read_body(receive: Receive) -> bytes:
    """The request body, refused past MAX_REQUEST_BYTES (Django's DATA_UPLOAD_MAX_MEMORY_SIZE)."""
    limit, chunks, size = settings.DATA_UPLOAD_MAX_MEMORY_SIZE, [], 0
    while True:
        event = await receive()
        chunk = event.get("body", b"")
        size += len(chunk)
        if size > limit:
            raise InvalidRequest("The request body is too large (see MAX_REQUEST_BYTES).", status=413)
        chunks.append(chunk)
        if not event.get("more_body"):
            return b"".join(chunks)


def parse_request(raw: bytes) -> dict[str, Any]:
    """Decode and check a Chat Completions request body."""
    try:
        body = json_text.loads(raw)
    except ValueError as exc:  # also undecodable bytes, and JSON nested too deep to read
        raise InvalidRequest(f"The request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    if "messages" not in body:
        raise InvalidRequest("Missing required parameter: 'messages'.")
    messages = body["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise InvalidRequest("'messages' must be a list of message objects.")
    for index, message in enumerate(messages):
        if problem := message_problem(message, where=f"messages[{index}]"):
            raise InvalidRequest(f"{problem}.")
    if body.get("tools") is not None and not isinstance(body["tools"], list):
        raise InvalidRequest("'tools' must be a list.")
    if body.get("stream"):
        raise InvalidRequest("The offline model does not support streaming; send 'stream': false.")
    if problem := first_problem(body, "body"):  # the rules hash the text as UTF-8
        raise InvalidRequest(f"Refused: {problem}.")
    return body


def message_problem(message: dict[str, Any], *, where: str) -> str:
    """Describe what is malformed about one message, or "" (the rules read only well-shaped ones)."""
    if message.get("role") == "tool" and message.get("content") is None:
        return f"'{where}.content' is required for a tool message"
    return content_problem(message.get("content"), where=f"{where}.content") or tool_calls_problem(
        message.get("tool_calls"), where=f"{where}.tool_calls"
    )


def content_problem(content: Any, *, where: str) -> str:
    """Content is a string, null, or a list of parts whose text is a string."""
    if content is None or isinstance(content, str):
        return ""
    if not isinstance(content, list):
        return f"'{where}' must be a string, null or a list of content parts"
    for index, part in enumerate(content):
        if not isinstance(part, dict):
            return f"'{where}[{index}]' must be a content part object"
        # A text part must carry its text; any part's text, when present, is joined as a string.
        if (part.get("type") == "text" or "text" in part) and not isinstance(part.get("text"), str):
            return f"'{where}[{index}].text' must be a string"
    return ""


def tool_calls_problem(tool_calls: Any, *, where: str) -> str:
    """tool_calls is null or a list of objects with function.name and function.arguments strings."""
    if tool_calls is None:
        return ""
    if not isinstance(tool_calls, list):
        return f"'{where}' must be a list of tool call objects"
    for index, call in enumerate(tool_calls):
        function = call.get("function") if isinstance(call, dict) else None
        if not isinstance(function, dict):
            return f"'{where}[{index}]' must be an object with a 'function' object"
        for key in ("name", "arguments"):
            if not isinstance(function.get(key), str):
                return f"'{where}[{index}].function.{key}' must be a string"
    return ""


def completion(message: dict[str, Any], *, model: str, messages: list[dict[str, Any]]) -> dict[str, Any]:
    """Wrap an assistant message into a chat.completion object."""
    prompt = rules.canonical_json(messages)
    calls = message.get("tool_calls") or []
    output = (message.get("content") or "") + "".join(c["function"]["arguments"] for c in calls)
    digest = hashlib.sha256(f"{prompt}|{rules.canonical_json(message)}".encode()).hexdigest()
    usage = {"prompt_tokens": len(prompt) // 4, "completion_tokens": len(output) // 4}
    return {
        "id": f"chatcmpl-offline-{digest[:24]}",
        "object": "chat.completion",
        "created": int(time.time()),
        "model": model,
        "choices": [{"index": 0, "message": message, "finish_reason": "tool_calls" if calls else "stop"}],
        "usage": {**usage, "total_tokens": usage["prompt_tokens"] + usage["completion_tokens"]},
        "system_fingerprint": "gatehouse-offline",
    }


def error(message: str) -> dict[str, Any]:
    """An error in the OpenAI shape, which the SDK raises as an APIStatusError."""
    return {"error": {"message": message, "type": "invalid_request_error", "param": None, "code": None}}


async def send_json(send: Send, data: dict[str, Any], *, status: int) -> None:
    payload = json.dumps(data).encode()
    headers = [(b"content-type", b"application/json"), (b"content-length", str(len(payload)).encode())]
    await send({"type": "http.response.start", "status": status, "headers": headers})
    await send({"type": "http.response.body", "body": payload})
