"""404, 403 (a stale form's too) and 500 answer in the app's own layout, with a way back; 500 needs
no request."""

import pytest
from django.test import Client, RequestFactory
from django.views.defaults import server_error

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
    response = server_error(RequestFactory().get("/"))

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
