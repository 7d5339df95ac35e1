"""The LangGraph server API's Ninja object (langgraph_server.py says what it serves): its token
auth (`x-api-key`), how each error answers (JSON, as LangGraph's server: {"detail": ...}), and
the strict bodies its searches share."""

from typing import Annotated, Any

from django.http import HttpRequest, HttpResponse
from ninja import Schema
from ninja.errors import ValidationError as NinjaValidationError
from ninja.security import APIKeyHeader
from pydantic import ConfigDict, Field

from agents.actions import InvalidInput, ThreadStateError
from agents.registry import UnknownAgent
from approvals.actions.errors import Conflict
from approvals.actions.tokens import access_token_user
from approvals.api.base import JsonErrorsApi, token_required
from approvals.api.threads import MAX_OFFSET
from approvals.models import LangGraphRun
from checkpoints.backends.base import CheckpointNotFound, CorruptCheckpoint
from checkpoints.models import Thread

MAX_SEARCH_LIMIT = 100  # each thread listed loads its LangGraph state; the SDK asks for 10


class ApiKey(APIKeyHeader):
    param_name = "x-api-key"

    def authenticate(self, request: HttpRequest, key: str | None) -> Any:
        user = access_token_user(key or "")
        if user is not None:
            request.user = user
        return user


api = JsonErrorsApi(
    title="Gatehouse: LangGraph server API",
    version="1",
    auth=ApiKey(),
    docs_url=None,
    docs_decorator=token_required(ApiKey(), detail="Send a valid API token: 'x-api-key: <token>'."),
    urls_namespace="langgraph",
)


def error(request: HttpRequest, status: int, detail: str) -> HttpResponse:
    return api.create_response(request, {"detail": detail}, status=status)


@api.exception_handler(NinjaValidationError)
def invalid_body(request: HttpRequest, exc: NinjaValidationError) -> HttpResponse:
    unserved = [str(e["loc"][-1]) for e in exc.errors if e.get("type") == "extra_forbidden"]
    if unserved and len(unserved) == len(exc.errors):  # a filter or option this server does not apply
        return error(request, 422, f"Not served by this server: {', '.join(unserved)}. Nothing was done.")
    return error(request, 422, f"The request is not valid: {exc.errors}")


@api.exception_handler(InvalidInput)
def invalid_input(request: HttpRequest, exc: InvalidInput) -> HttpResponse:
    return error(request, 422, "; ".join(f"{k}: {v}" for k, v in exc.errors.items()))


@api.exception_handler(UnknownAgent)
def unknown_assistant(request: HttpRequest, exc: UnknownAgent) -> HttpResponse:
    return error(request, 404, str(exc))


@api.exception_handler(Thread.DoesNotExist)
def unknown_thread(request: HttpRequest, exc: Exception) -> HttpResponse:
    return error(request, 404, "Thread not found.")


@api.exception_handler(LangGraphRun.DoesNotExist)
def unknown_run(request: HttpRequest, exc: Exception) -> HttpResponse:
    return error(request, 404, "Run not found.")


@api.exception_handler(CheckpointNotFound)
def unknown_checkpoint(request: HttpRequest, exc: CheckpointNotFound) -> HttpResponse:
    return error(request, 404, "Checkpoint not found.")


@api.exception_handler(CorruptCheckpoint)
def corrupt_checkpoint(request: HttpRequest, exc: CorruptCheckpoint) -> HttpResponse:
    return error(request, 409, str(exc))


@api.exception_handler(Conflict)
def conflict(request: HttpRequest, exc: Conflict) -> HttpResponse:
    return error(request, 409, str(exc))


@api.exception_handler(ThreadStateError)
def wrong_status(request: HttpRequest, exc: ThreadStateError) -> HttpResponse:
    return error(request, 409, str(exc))


@api.exception_handler(PermissionError)
def forbidden(request: HttpRequest, exc: PermissionError) -> HttpResponse:
    return error(request, 403, str(exc))


class Strict(Schema):
    """A body whose every field is served: one a client sends that is not (a filter, an option)
    is a 422 naming it, not ignored (a search would list the wrong threads)."""

    model_config = ConfigDict(extra="forbid")


class SearchIn(Strict):
    limit: Annotated[int, Field(ge=1, le=MAX_SEARCH_LIMIT)] = 10
    offset: Annotated[int, Field(ge=0, le=MAX_OFFSET)] = 0
