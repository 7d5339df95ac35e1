"""404, 403 (a stale form's too) and 500 answer in the app's own layout, with a way back; 500 needs
no request. Under the APIs' paths the errors Django answers itself are JSON."""

import json

import pytest
from django.test import Client, RequestFactory
from django.urls import get_resolver

from approvals.actions.tokens import do_create_token
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def logged_in(username: str, role: str) -> Client:
    client = Client()
    client.force_login(make_user(username, role))
    return client


def test_an_unknown_thread_is_a_404_in_the_layout_with_a_way_back() -> None:
    response = logged_in("olga", "operator").get("/threads/no-such-thread/")

    html = response.content.decode()
    assert response.status_code == 404
    assert 'class="topbar"' in html and "<h1>Not found</h1>" in html and "No such thread." in html
    assert 'href="/">Back to the inbox</a>' in html and 'href="/threads/">Threads</a>' in html


def test_a_page_the_role_may_not_open_is_a_403_that_says_why() -> None:
    response = logged_in("rita", "reviewer").get("/ledger/")

    html = response.content.decode()
    assert response.status_code == 403
    assert 'class="topbar"' in html and "Only admins may read the audit ledger." in html
    assert 'href="/">Back to the inbox</a>' in html and 'href="/threads/">Threads</a>' in html


def test_a_form_with_a_stale_csrf_token_is_a_403_in_the_layout_saying_what_to_do() -> None:
    client = Client(enforce_csrf_checks=True)
    client.force_login(make_user("rita", "reviewer"))

    response = client.post("/logout/")  # no token: as after a log-in in another tab

    html = response.content.decode()
    assert response.status_code == 403
    assert 'class="topbar"' in html and "This form has expired" in html and "Nothing was changed" in html
    assert "<span>rita</span>" in html  # the top bar of a signed-in person, links and all
    assert 'href="/">Back to the inbox</a>' in html and 'href="/threads/">Threads</a>' in html


def test_the_500_page_renders_in_the_layout_without_any_request_context() -> None:
    response = get_resolver().resolve_error_handler(500)(RequestFactory().get("/"))

    html = response.content.decode()
    assert response.status_code == 500
    assert 'class="topbar"' in html and "Something went wrong" in html
    assert 'href="/">Back to the inbox</a>' in html and 'href="/threads/">Threads</a>' in html


def test_an_unknown_address_is_a_404_that_names_no_exception_class() -> None:
    response = logged_in("rita", "reviewer").get("/approvals/")

    html = response.content.decode()
    assert response.status_code == 404
    assert "There is nothing at this address." in html
    assert "Resolver404" not in html
    assert 'href="/">Back to the inbox</a>' in html and 'href="/threads/">Threads</a>' in html


def test_under_the_apis_an_unknown_address_a_refused_request_and_a_failure_answer_json() -> None:
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=make_user('ada', 'admin'))}"})
    many = "&".join(f"f{n}=1" for n in range(1100))  # over DATA_UPLOAD_MAX_NUMBER_FIELDS

    unknown = api.get("/api/no-such-endpoint")
    refused = api.get(f"/api/approvals?{many}")
    failed = get_resolver().resolve_error_handler(500)(RequestFactory().get("/langgraph/threads/search"))

    assert (unknown.status_code, refused.status_code, failed.status_code) == (404, 400, 500)
    for answer in (unknown, refused, failed):
        assert answer["Content-Type"] == "application/json", answer.content[:200]
        assert json.loads(answer.content)["detail"]
    page = logged_in("rita", "reviewer").get(f"/threads/?{many}")  # a page stays a page
    assert page.status_code == 400 and 'class="topbar"' in page.content.decode()
