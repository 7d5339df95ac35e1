"""A Content-Security-Policy on every HTML page (config/csp.py), and no page breaks it: chromium
reports no violation on any main page, Django admin's included, nor while the pages work."""

from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client
from playwright.sync_api import Page, expect

from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user
from tests.live import thread_status

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def violations(page: Page) -> list[str]:
    """Collect the console's CSP reports (and page errors) for the life of the page."""
    seen: list[str] = []
    page.on("console", lambda m: seen.append(m.text) if "Content Security Policy" in m.text else None)
    page.on("pageerror", lambda e: seen.append(f"page error: {e}"))
    return seen


@pytest.fixture
def admin_user() -> Iterator[User]:
    ada = off_loop(lambda: make_user("ada", "admin", "operator", "reviewer", queues=()))
    ada.is_staff = ada.is_superuser = True
    off_loop(ada.save)
    yield ada


def main_pages(gate: ApprovalRequest) -> list[str]:
    thread_id, checkpoint_id = gate.thread_id, gate.checkpoint_id
    first = off_loop(lambda: get_backend().list(thread_id=thread_id)[-1].id)
    return [
        "/",
        f"/approvals/{gate.pk}/",
        "/threads/",
        f"/threads/{thread_id}/",
        f"/threads/{thread_id}/checkpoints/{checkpoint_id}/",
        f"/threads/{thread_id}/diff/?from={first}&to={checkpoint_id}",
        f"/threads/{thread_id}/state/",
        "/ledger/",
        "/admin/",
        f"/admin/approvals/approvalrequest/{gate.pk}/change/",
        "/admin/approvals/queue/add/",
        "/admin/auth/user/",
    ]


def test_every_main_page_carries_the_policy_and_breaks_none_of_it(
    page: Page, live_server_url: str, admin_user: User
) -> None:
    gate = off_loop(make_gate)
    seen = violations(page)

    response = page.goto(f"{live_server_url}/login/")
    assert response is not None and "frame-ancestors 'none'" in response.headers["content-security-policy"]
    log_in(page, live_server_url, "ada")
    for path in main_pages(gate):
        response = page.goto(f"{live_server_url}{path}")
        assert response is not None and response.status == 200, path
        policy = response.headers.get("content-security-policy", "")
        assert "default-src 'self'" in policy and "script-src 'self'" in policy, path
        assert "unsafe" not in policy, path
        page.wait_for_load_state("networkidle")
        assert seen == [], (path, seen)


def test_the_pages_work_under_the_policy(page: Page, live_server_url: str, admin_user: User) -> None:
    gate = off_loop(make_gate)
    seen = violations(page)
    log_in(page, live_server_url, "ada")

    # htmx (filters, live socket) and the thread list's search.
    page.goto(f"{live_server_url}/threads/")
    expect(page.locator("#live-status")).to_have_text("live")
    # htmx evaluates no text as code and injects no <style> (README, "Security model").
    assert page.evaluate("[htmx.config.allowEval, htmx.config.includeIndicatorStyles]") == [False, False]
    page.fill("input[name=q]", gate.thread_id)
    expect(page.locator("#thread-results")).to_contain_text(gate.thread_id)

    # Cancelling asks first (it was an inline onsubmit handler): dismissed, nothing happens.
    page.goto(f"{live_server_url}/threads/{gate.thread_id}/")
    asked: list[str] = []

    def answer(dialog: Any) -> None:
        asked.append(dialog.message)
        dialog.dismiss()

    page.on("dialog", answer)
    page.get_by_role("button", name="Cancel").click()
    page.wait_for_timeout(300)
    assert asked and "Cancel this thread?" in asked[0]
    assert off_loop(lambda: thread_status(gate.thread_id)) == "waiting"

    # The decision page's form (htmx POST) decides.
    page.goto(f"{live_server_url}/approvals/{gate.pk}/")
    page.get_by_role("button", name="Approve").first.click()
    expect(page.locator("body")).to_contain_text("pproved")
    assert seen == []


def test_error_pages_carry_the_policy_too() -> None:
    client = Client()
    client.force_login(off_loop(lambda: make_user("rita", "reviewer")))
    response = client.get("/threads/no-such-thread/")
    assert response.status_code == 404
    policy = response["Content-Security-Policy"]
    assert "object-src 'none'" in policy and "form-action 'self'" in policy and "base-uri 'self'" in policy
