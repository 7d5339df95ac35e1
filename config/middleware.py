"""Turn a lost database, or encrypted data the configured keys cannot open, into a clear 503
instead of a traceback, and an oversized body into a 413."""

import logging
import sqlite3
from collections.abc import Callable
from typing import Any

from django.conf import settings
from django.contrib.auth.middleware import LoginRequiredMiddleware as BaseLoginRequiredMiddleware
from django.core.exceptions import RequestDataTooBig
from django.db import DatabaseError, InterfaceError, InternalError, OperationalError
from django.http import HttpRequest, HttpResponse, HttpResponseBase, JsonResponse

from checkpoints.storage.crypto import SealError

logger = logging.getLogger(__name__)


# Postgres's codes for a server that cannot serve now (errcodes-appendix): a connection failed
# or lost (08), too few resources (53: too many connections, disk full), shutting down or
# recovering (57P), read-only (25006: a standby). A query canceled by its timeout (57014), a
# deadlock or a lock not available is a fault to fix (a 500 with its traceback), not an outage.
UNAVAILABLE_SQLSTATES = ("08", "53", "57P", "25006")
# SQLite's: busy or locked past the timeout, read-only, I/O error, disk full, cannot open.
UNAVAILABLE_SQLITE_CODES = frozenset(
    {
        sqlite3.SQLITE_BUSY,
        sqlite3.SQLITE_LOCKED,
        sqlite3.SQLITE_READONLY,
        sqlite3.SQLITE_IOERR,
        sqlite3.SQLITE_FULL,
        sqlite3.SQLITE_CANTOPEN,
    }
)
API_PREFIXES = ("/api/", "/langgraph/")  # token-authenticated JSON APIs: JSON errors, no login page


def is_api(request: HttpRequest) -> bool:
    return request.path.startswith(API_PREFIXES)


def json_error(request: HttpRequest, detail: str, *, status: int) -> JsonResponse:
    """An error as JSON: Gatehouse's API always sends `errors` too (the fields at fault, none
    here; README, "HTTP API"), so a client reads one shape; /langgraph keeps LangGraph's."""
    if request.path.startswith("/langgraph/"):
        return JsonResponse({"detail": detail}, status=status)
    return JsonResponse({"detail": detail, "errors": None}, status=status)


def answer(request: HttpRequest, message: str, *, status: int) -> HttpResponse:
    """The message as JSON for the API (or a client asking for JSON), else as plain text."""
    if is_api(request) or request.headers.get("Accept") == "application/json":
        return json_error(request, message, status=status)
    return HttpResponse(message, status=status, content_type="text/plain; charset=utf-8")


def is_database_unavailable(exception: BaseException) -> bool:
    """Whether a database error means the database cannot serve now (try again later), rather
    than a fault in the statement or its data, which is a bug (no such table, value too long)."""
    if isinstance(exception, InterfaceError):
        return True  # the connection is closed or unusable
    if not isinstance(exception, OperationalError | InternalError):
        return False
    cause = exception.__cause__
    if isinstance(cause, sqlite3.Error):
        return (getattr(cause, "sqlite_errorcode", 0) & 0xFF) in UNAVAILABLE_SQLITE_CODES
    sqlstate = getattr(cause, "sqlstate", None)
    if sqlstate is None:
        # No code from the server: libpq's own (refused, lost mid-query) or a pool's timeout.
        return isinstance(exception, OperationalError)
    return str(sqlstate).startswith(UNAVAILABLE_SQLSTATES)


def database_unavailable(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A clear 503 for a request the database could not serve."""
    logger.warning("database unavailable: %s", exception)
    message = "The database is unavailable right now. Nothing was changed; try again shortly."
    return answer(request, message, status=503)


def keys_cannot_open(request: HttpRequest, exception: Exception) -> HttpResponse:
    """A clear 503 for data no configured CHECKPOINT_ENCRYPTION_KEY opens: the server's setting
    to fix, not the request (an old key dropped before rotate_checkpoint_key ran, say)."""
    logger.error("encrypted data cannot be opened on %s: %s", request.path, exception)
    message = (
        "Stored data cannot be decrypted with the configured CHECKPOINT_ENCRYPTION_KEY: the key it "
        "was written with is missing (keep old keys after the new one until rotate_checkpoint_key "
        "has run), or the data was altered. Nothing was changed."
    )
    return answer(request, message, status=503)


def too_large(request: HttpRequest) -> HttpResponse:
    limit = settings.DATA_UPLOAD_MAX_MEMORY_SIZE
    message = (
        f"The request body is over the limit of {limit:,} bytes (MAX_REQUEST_BYTES). Nothing was changed."
    )
    return answer(request, message, status=413)


class DatabaseUnavailableMiddleware:
    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        return self.get_response(request)

    def process_exception(self, request: HttpRequest, exception: Exception) -> HttpResponse | None:
        if isinstance(exception, RequestDataTooBig):  # the API reads its body in the view
            return too_large(request)
        if isinstance(exception, SealError):
            return keys_cannot_open(request, exception)
        if not is_database_unavailable(exception):
            return None  # a bug: Django's 500, its traceback logged
        return database_unavailable(request, exception)


class LoginRequiredMiddleware(BaseLoginRequiredMiddleware):
    """Django's login-required default, except the JSON API (it authenticates bearer tokens)."""

    def process_view(
        self, request: HttpRequest, view_func: Callable[..., Any], view_args: Any, view_kwargs: Any
    ) -> HttpResponseBase | None:
        if is_api(request):
            return None
        try:
            return super().process_view(request, view_func, view_args, view_kwargs)
        except DatabaseError as exc:
            # Loading the session is a request's first query, and it runs here, before the view
            # (where process_exception would catch it): an outage would otherwise be a 500.
            if not is_database_unavailable(exc):
                raise
            return database_unavailable(request, exc)
