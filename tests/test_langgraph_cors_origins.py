"""LANGGRAPH_CORS_ORIGINS (README, "Security model"): "*" any origin, a comma-separated list
only those, blank none; and only /langgraph answers another origin at all."""

import pytest
from django.test import Client
from pytest_django.fixtures import Settings

from tests.factories import settings_read_with

pytestmark = pytest.mark.django_db

INBOX = "https://inbox.example"


def cors_settings(value: str, monkeypatch: pytest.MonkeyPatch) -> list[object]:
    read = settings_read_with(monkeypatch, LANGGRAPH_CORS_ORIGINS=value)
    return [read["CORS_ALLOW_ALL_ORIGINS"], read["CORS_ALLOWED_ORIGINS"]]


def test_the_setting_reads_any_a_list_or_none(monkeypatch: pytest.MonkeyPatch) -> None:
    assert cors_settings("*", monkeypatch) == [True, []]
    listed = cors_settings(f" {INBOX}, https://other.example ", monkeypatch)
    assert listed == [False, [INBOX, "https://other.example"]]
    assert cors_settings("", monkeypatch) == [False, []]


def allowed_origin(origin: str, path: str = "/langgraph/threads/search") -> str | None:
    preflight = Client().options(
        path,
        HTTP_ORIGIN=origin,
        HTTP_ACCESS_CONTROL_REQUEST_METHOD="POST",
        HTTP_ACCESS_CONTROL_REQUEST_HEADERS="x-api-key",
    )
    return preflight.headers.get("Access-Control-Allow-Origin")


def test_a_listed_origin_is_answered_and_another_is_not(settings: Settings) -> None:
    settings.CORS_ALLOW_ALL_ORIGINS, settings.CORS_ALLOWED_ORIGINS = False, [INBOX]

    assert allowed_origin(INBOX) == INBOX
    assert allowed_origin("https://evil.example") is None
    assert allowed_origin(INBOX, path="/api/threads") is None  # only the LangGraph API


def test_blank_answers_no_origin(settings: Settings) -> None:
    settings.CORS_ALLOW_ALL_ORIGINS, settings.CORS_ALLOWED_ORIGINS = False, []

    assert allowed_origin(INBOX) is None
