"""An expected 4xx (a PermissionDenied's 403, a suspicious request's 400) logs one line and no
traceback, so a grep for "Traceback" finds failures only; a 500 still logs its traceback. Read
from the process log's own handler, as configured by settings.LOGGING."""

import io
import logging
from collections.abc import Iterator

import pytest
from django.http import HttpRequest, HttpResponse
from django.test import Client, override_settings
from django.urls import include, path

from tests.factories import make_user

pytestmark = pytest.mark.django_db


def boom(request: HttpRequest) -> HttpResponse:
    raise RuntimeError("forced failure")


# This module is the urlconf of the tests below: the app's, and a view that fails.
urlpatterns = [path("boom/", boom), path("", include("config.urls"))]
handler400 = "config.errors.bad_request"
handler404 = "config.errors.not_found"
handler500 = "config.errors.server_error"


@pytest.fixture
def process_log() -> Iterator[io.StringIO]:
    """What the configured console handler writes (stderr in production)."""
    [console] = [h for h in logging.getLogger().handlers if h.get_name() == "console"]
    assert isinstance(console, logging.StreamHandler)
    written = io.StringIO()
    previous = console.setStream(written)
    yield written
    console.setStream(previous)


def signed_in(role: str) -> Client:
    client = Client(raise_request_exception=False)
    client.force_login(make_user(f"{role}-1", role))
    return client


@override_settings(ROOT_URLCONF=__name__)
def test_a_permission_denied_403_logs_one_line_without_a_traceback(process_log: io.StringIO) -> None:
    assert signed_in("reviewer").get("/ledger/").status_code == 403  # raises PermissionDenied

    lines = process_log.getvalue().splitlines()
    assert [line.split(" ", 3)[-1] for line in lines] == [
        "django.request Forbidden (Permission denied): /ledger/"
    ]
    assert "Traceback" not in process_log.getvalue()


@override_settings(ROOT_URLCONF=__name__, ALLOWED_HOSTS=["testserver"])
def test_a_suspicious_request_400_logs_without_a_traceback(process_log: io.StringIO) -> None:
    assert Client().get("/healthz", HTTP_HOST="evil.example").status_code == 400  # DisallowedHost

    assert "Invalid HTTP_HOST header" in process_log.getvalue()
    assert "Traceback" not in process_log.getvalue()


@override_settings(ROOT_URLCONF=__name__)
def test_a_500_still_logs_its_traceback(process_log: io.StringIO) -> None:
    assert signed_in("admin").get("/boom/").status_code == 500

    log = process_log.getvalue()
    assert "ERROR django.request Internal Server Error: /boom/" in log
    assert "Traceback" in log and "RuntimeError: forced failure" in log
