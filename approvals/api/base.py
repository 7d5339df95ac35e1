"""The JSON API instance: bearer-token auth and error shapes. Routers live beside it by topic."""

from typing import Any

from django.http import HttpRequest, HttpResponse
from django.utils import timezone
from ninja import NinjaAPI, Schema
from ninja.errors import AuthenticationError
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import HttpBearer

from agents.actions import InvalidInput, ThreadStateError
from approvals.models import ApiToken
from checkpoints.backends.base import CheckpointError, HeadConflict


class BearerToken(HttpBearer):
    def authenticate(self, request: HttpRequest, token: str) -> Any:
        row = (
            ApiToken.objects.select_related("user")
            .filter(token_hash=ApiToken.hash_token(token), revoked_at__isnull=True, user__is_active=True)
            .first()
        )
        if row is None:
            return None
        ApiToken.objects.filter(pk=row.pk).update(last_used_at=timezone.now())
        request.user = row.user
        return row.user


api = NinjaAPI(title="Gatehouse API", version="1", auth=BearerToken(), docs_url=None, urls_namespace="api")


@api.exception_handler(NinjaValidationError)
def invalid_body(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    errors = {".".join(str(p) for p in e.get("loc", ()) if p != "body"): e.get("msg", "") for e in exc.errors}
    return api.create_response(request, {"detail": "The request is not valid.", "errors": errors}, status=400)


@api.exception_handler(InvalidInput)
def invalid_input(request: HttpRequest, exc: InvalidInput) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc), "errors": exc.errors}, status=400)


@api.exception_handler(ThreadStateError)
def wrong_status(request: HttpRequest, exc: ThreadStateError) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc)}, status=409)


@api.exception_handler(CheckpointError)
def missing(request: HttpRequest, exc: CheckpointError) -> HttpResponse:
    status = 409 if isinstance(exc, HeadConflict) else 404
    return api.create_response(request, {"detail": str(exc)}, status=status)


@api.exception_handler(PermissionError)
def forbidden(request: HttpRequest, exc: PermissionError) -> HttpResponse:
    return api.create_response(request, {"detail": str(exc)}, status=403)


@api.exception_handler(AuthenticationError)
def unauthenticated(request: HttpRequest, exc: AuthenticationError) -> HttpResponse:
    return api.create_response(
        request, {"detail": "Send a valid API token: 'Authorization: Bearer <token>'."}, status=401
    )


class Error(Schema):
    detail: str
    errors: dict[str, str] | None = None
