"""Refused and failed requests are in the process logs (README, "Security model"), with their
status and path; a request that succeeds is not (the web server keeps no access log)."""

import logging

import pytest
from django.test import Client

from approvals.actions.tokens import do_create_token
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def test_a_refused_request_is_logged_with_its_status_and_a_good_one_is_not(
    caplog: pytest.LogCaptureFixture,
) -> None:
    rita = make_user("rita", "reviewer")
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=rita)}"})
    page = Client()
    page.force_login(rita)

    with caplog.at_level(logging.INFO, logger="django.request"):
        assert api.get("/api/approvals").status_code == 200
        assert page.get("/").status_code == 200
        assert not caplog.records
        assert api.get("/api/approvals", {"status": "bogus"}).status_code == 400
        assert (
            api.post(
                "/api/threads", {"agent": "refunds", "input": "hi"}, content_type="application/json"
            ).status_code
            == 403
        )
        assert page.get("/threads/no-such-thread/").status_code == 404
        assert Client().get("/api/approvals").status_code == 401

    logged = [(r.levelname, r.getMessage()) for r in caplog.records]
    assert logged == [
        ("WARNING", "Bad Request: /api/approvals"),
        ("WARNING", "Forbidden: /api/threads"),
        ("WARNING", "Not Found: /threads/no-such-thread/"),
        ("WARNING", "Unauthorized: /api/approvals"),
    ]
