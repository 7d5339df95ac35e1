"""What the hand-written ASGI apps (the offline model, the WebSocket guards) share: the
callables' types and reading a request header from the scope."""

from collections.abc import Awaitable, Callable, Mapping
from typing import Any

Scope = dict[str, Any]
Receive = Callable[[], Awaitable[dict[str, Any]]]
Send = Callable[[Mapping[str, Any]], Awaitable[None]]
App = Callable[[Scope, Receive, Send], Awaitable[None]]


def header(scope: Scope, name: bytes) -> str:
    """The request header `name` (lower-case), or "" if absent."""
    for key, value in scope.get("headers", []):
        if key.lower() == name:
            return bytes(value).decode("latin-1")
    return ""
