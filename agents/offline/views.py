"""The built-in offline model: an OpenAI-compatible Chat Completions endpoint answering from rules."""

import asyncio
import hashlib
import json
import time
from typing import Any

from django.conf import settings
from django.contrib.auth.decorators import login_not_required
from django.core import signing
from django.core.exceptions import RequestDataTooBig
from django.http import HttpRequest, HttpResponse, JsonResponse
from django.views.decorators.csrf import csrf_exempt

from agents.offline import rules

DEFAULT_MODEL = "gatehouse-offline"


class InvalidRequest(Exception):
    """The request body is not a Chat Completions request we can answer."""


DELAY_HEADER = "X-Gatehouse-Offline-Delay-Ms"
MAX_DELAY_MS = 120_000
# The endpoint is anonymous: a delay anyone could pick would hold a connection open for
# free. A caller's delay counts only when signed with SECRET_KEY, as this installation's
# workers sign theirs (a slow worker in a fault test).
DELAY_SIGNER = signing.Signer(salt="gatehouse.offline-delay")


def signed_delay(ms: int) -> str:
    return DELAY_SIGNER.sign(str(ms))


def delay_for(request: HttpRequest) -> int:
    """The server's delay, or a signed caller's (a worker with OFFLINE_MODEL_DELAY_MS) if longer."""
    try:
        asked = int(DELAY_SIGNER.unsign(request.headers.get(DELAY_HEADER, "")))
    except (signing.BadSignature, ValueError):
        asked = 0
    return min(max(settings.OFFLINE_MODEL_DELAY_MS, asked), MAX_DELAY_MS)


@csrf_exempt
@login_not_required
async def chat_completions(request: HttpRequest) -> HttpResponse:
    """Answer a (non-streaming) Chat Completions request; any bearer key is accepted."""
    if request.method != "POST":
        return error_response("Use POST for chat completions.", status=405)
    try:
        body = parse_request(request.body)
    except RequestDataTooBig:
        return error_response("The request body is too large (see MAX_REQUEST_BYTES).", status=413)
    except InvalidRequest as exc:
        return error_response(str(exc), status=400)
    delay_ms = delay_for(request)
    if delay_ms > 0:
        # Async so a slow (simulated) model does not hold up other requests.
        await asyncio.sleep(delay_ms / 1000)
    message = rules.reply(body["messages"], body.get("tools") or [])
    model = body.get("model")
    model = model if isinstance(model, str) else DEFAULT_MODEL
    return JsonResponse(completion(message, model=model, messages=body["messages"]))


def parse_request(raw: bytes) -> dict[str, Any]:
    """Decode and check a Chat Completions request body."""
    try:
        body = json.loads(raw)
    except ValueError as exc:  # also covers undecodable bytes
        raise InvalidRequest(f"The request body is not valid JSON: {exc}") from exc
    if not isinstance(body, dict):
        raise InvalidRequest("The request body must be a JSON object.")
    if "messages" not in body:
        raise InvalidRequest("Missing required parameter: 'messages'.")
    messages = body["messages"]
    if not isinstance(messages, list) or not all(isinstance(m, dict) for m in messages):
        raise InvalidRequest("'messages' must be a list of message objects.")
    if body.get("tools") is not None and not isinstance(body["tools"], list):
        raise InvalidRequest("'tools' must be a list.")
    if body.get("stream"):
        raise InvalidRequest("The offline model does not support streaming; send 'stream': false.")
    return body


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


def error_response(message: str, *, status: int) -> JsonResponse:
    """Return an error in the OpenAI shape, which the SDK raises as an APIStatusError."""
    error = {"message": message, "type": "invalid_request_error", "param": None, "code": None}
    return JsonResponse({"error": error}, status=status)
