"""Refuse text no column can store: NUL characters and lone UTF-16 surrogates.

PostgreSQL refuses NUL in text and JSON, and a lone surrogate (JSON's "\\ud800") cannot be
encoded as UTF-8 anywhere: either would reach the database and end as a 500. One check at the
edge — path, query, form fields, JSON bodies and WebSocket paths — answers a clear 400 instead,
as it does for a JSON body no view could read (checkpoints.json_text).
"""

import json
from collections.abc import Callable
from urllib.parse import unquote

from django.core.exceptions import BadRequest, RequestDataTooBig
from django.http import HttpRequest, HttpResponse
from django.http.multipartparser import MultiPartParserError

from checkpoints import json_text
from checkpoints.storable_text import first_problem, text_problem
from config.asgi_scope import App, Receive, Scope, Send
from config.middleware import answer, too_large

FORM_TYPES = ("application/x-www-form-urlencoded", "multipart/form-data")


def request_problem(request: HttpRequest) -> str:
    """Describe the first unstorable text in the request's path, query, form or JSON body."""
    if problem := text_problem(request.path):
        return f"the path {problem}"
    for key, values in request.GET.lists():
        for value in (key, *values):
            if problem := text_problem(value):
                return f"the query parameter {key!r} {problem}"
    content_type = request.content_type or ""
    if request.method in ("GET", "HEAD", "OPTIONS"):
        return ""
    if content_type in FORM_TYPES:
        # The whole body first: a multipart form parsed straight from the stream leaves no body
        # for a view that reads it (django-ninja reads any body as JSON: a 500).
        request.body  # noqa: B018
        for key, values in request.POST.lists():
            for value in (key, *values):
                if problem := text_problem(value):
                    return f"the field {key!r} {problem}"
    if content_type == "multipart/form-data" or not request.body:  # a multipart body is read once
        return ""
    # Any other body may be JSON to its view: django-ninja parses a body whatever its type says
    # (curl -d sends a form type).
    try:
        body = json_text.loads(request.body)
    except (json.JSONDecodeError, UnicodeDecodeError):
        return ""  # not JSON: a form, checked above, or malformed, and the view says where
    except ValueError as exc:  # JSON no view can read: too deep, NaN, an endless integer
        return f"the body cannot be read: {exc}"
    return first_problem(body, "body")


def refuse(request: HttpRequest, problem: str) -> HttpResponse:
    return answer(request, f"Refused: {problem}. Nothing was changed.", status=400)


class BadTextMiddleware:
    """A clear 400 for a request carrying a NUL or a lone surrogate, before any view or query."""

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        try:
            problem = request_problem(request)
        except RequestDataTooBig:
            # The first read of the body, here for every view (forms included, whose CSRF check
            # would otherwise hit it first and answer a bare 400): the promised 413.
            return too_large(request)
        except MultiPartParserError:
            problem = ""  # the view's own parsing answers it
        except BadRequest as exc:
            # A body Django refuses to read (a form in a charset other than UTF-8): every later
            # read of request.POST (the CSRF check, the 400 page's) would raise it again, a 500.
            return refuse(request, f"the body cannot be read: {exc}")
        if problem:
            return refuse(request, problem)
        return self.get_response(request)


class BadTextWebSocketGuard:
    """Refuse a WebSocket handshake whose path or query holds a NUL or a lone surrogate (403),
    instead of letting a consumer's query crash it."""

    def __init__(self, app: App) -> None:
        self.app = app

    async def __call__(self, scope: Scope, receive: Receive, send: Send) -> None:
        query = unquote(scope.get("query_string", b"").decode("utf-8", errors="replace"))
        if scope["type"] == "websocket" and (text_problem(scope.get("path", "")) or text_problem(query)):
            await receive()  # the handshake's websocket.connect; a close before accept is a 403
            await send({"type": "websocket.close", "code": 4400})
            return
        await self.app(scope, receive, send)
