"""The JSON API instance: bearer-token auth and error shapes. Routers live beside it by topic."""

import asyncio
from collections.abc import Callable
from functools import wraps
from typing import Any

from django.http import HttpRequest, HttpResponse
from django.urls import URLPattern
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError, HttpError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer

from agents.actions import InvalidInput, ThreadStateError
from approvals.actions.tokens import access_token_user
from checkpoints.backends.base import CheckpointError, CorruptCheckpoint, HeadConflict
from config.middleware import json_error


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        user = access_token_user(token)
        if user is None:
            return None
        request.user = user
        return user


UNAUTHENTICATED = "Send a valid API token: 'Authorization: Bearer <token>'."
View = Callable[..., HttpResponse]


def token_required(auth: Callable[[HttpRequest], Any], *, detail: str) -> Callable[[View], View]:
    """Guard an API's OpenAPI document like its operations (it maps the API for an attacker)."""

    def guard(view: View) -> View:
        @wraps(view)
        def guarded(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
            if auth(request) is None:
                return json_error(request, detail, status=401)
            return view(request, *args, **kwargs)

        return guarded

    return guard


def not_allowed(request: HttpRequest, allowed: str) -> HttpResponse:
    """A method not served at an address the API has, as JSON like every other error there."""
    detail = f"Method Not Allowed: not served here (served: {allowed or 'none'})."
    response = json_error(request, detail, status=405)
    response["Allow"] = allowed
    return response


def _json_405(view: View) -> View:
    @wraps(view)  # keeps csrf_exempt
    def answered(request: HttpRequest, *args: Any, **kwargs: Any) -> HttpResponse:
        response = view(request, *args, **kwargs)
        if response.status_code == 405 and "json" not in response.get("Content-Type", ""):
            return not_allowed(request, response.get("Allow", ""))
        return response

    return answered


class JsonErrorsApi(NinjaAPI):
    """django-ninja answers a method an address does not serve with a text 405 ("Method not
    allowed"), which a client cannot read as it reads the API's other errors (LangGraph's client
    raised it without a reason): here it is JSON, in the API's error shape, with its Allow."""

    @property
    def urls(self) -> Any:
        patterns, app_name, namespace = super().urls
        for pattern in patterns:
            if isinstance(pattern, URLPattern) and not asyncio.iscoroutinefunction(pattern.callback):
                pattern.callback = _json_405(pattern.callback)
        return patterns, app_name, namespace


api = JsonErrorsApi(
    title="Gatehouse API",
    version="1",
    auth=BearerToken(),
    docs_url=None,
    docs_decorator=token_required(BearerToken(), detail=UNAUTHENTICATED),
    urls_namespace="api",
)


def _field(loc: Any) -> str:
    return ".".join(str(p) for p in loc if p != "body")


@api.exception_handler(NinjaValidationError)
def invalid_body(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    errors = {_field(e.get("loc", ())): e.get("msg", "") for e in exc.errors}
    if "" in errors:  # the body itself is missing: no field to name
        errors["body"] = "send a JSON object with this call's fields"
        del errors[""]
    return api.create_response(request, {"detail": "The request is not valid.", "errors": errors}, status=400)


@api.exception_handler(InvalidInput)
def invalid_input(request: HttpRequest, exc: InvalidInput) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc), "errors": exc.errors}, status=400)


@api.exception_handler(ThreadStateError)
def wrong_status(request: HttpRequest, exc: ThreadStateError) -> HttpResponse:
    return json_error(request, str(exc), status=409)


@api.exception_handler(CheckpointError)
def missing(request: HttpRequest, exc: CheckpointError) -> HttpResponse:
    # A checkpoint that fails its integrity check exists: a conflict with what is stored.
    status = 409 if isinstance(exc, HeadConflict | CorruptCheckpoint) else 404
    return json_error(request, str(exc), status=status)


@api.exception_handler(PermissionError)
def forbidden(request: HttpRequest, exc: PermissionError) -> HttpResponse:
    return json_error(request, str(exc), status=403)


@api.exception_handler(AuthenticationError)
def unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return json_error(request, UNAUTHENTICATED, status=401)


@api.exception_handler(HttpError)
def http_error(request: HttpRequest, exc: HttpError) -> HttpResponse:
    """django-ninja's own refusals, such as a body that is not JSON."""
    return json_error(request, str(exc), status=exc.status_code)


class Error(Schema):
    detail: str
    errors: dict[str, str] | None = None
