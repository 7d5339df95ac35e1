"""An open decision page whose thread an admin deletes says so, by whom, in place of its panel:
no Approve button is left to click into a 404, and the live badge does not claim to reconnect."""

import pytest
from playwright.sync_api import Page, expect

from approvals.actions.threads import do_delete_thread
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_an_open_decision_page_shows_the_thread_was_deleted_in_place_of_its_buttons(
    page: Page, live_server_url: str
) -> None:
    ada, _ = make_user("ada", "admin"), make_user("rita", "reviewer")
    gate = make_gate()
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/approvals/{gate.pk}/")
    expect(page.locator("#live-status")).to_have_text("live")
    expect(page.get_by_role("button", name="Approve")).to_be_visible()

    off_loop(lambda: do_delete_thread(gate.thread_id, user=ada))

    expect(page.locator("[data-thread-deleted]")).to_have_text(
        "This thread was deleted by ada. Nothing is left to decide."
    )
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.locator(".live-status")).to_have_text("thread deleted")
    page.wait_for_timeout(1500)  # the socket has closed by now: still no "reconnecting"
    expect(page.locator(".live-status")).to_have_text("thread deleted")


def test_an_open_thread_page_on_a_phone_shows_the_deletion_at_the_top_not_only_below_the_conversation(
    page: Page, live_server_url: str
) -> None:
    ada, _ = make_user("ada", "admin"), make_user("olga", "operator")
    gate = make_gate()
    page.set_viewport_size({"width": 400, "height": 800})
    log_in(page, live_server_url, "olga")
    page.goto(f"{live_server_url}/threads/{gate.thread_id}/")
    expect(page.locator("#live-status")).to_have_text("live")

    off_loop(lambda: do_delete_thread(gate.thread_id, user=ada))

    expect(page.locator("#thread-side [data-thread-deleted]")).to_have_text("This thread was deleted by ada.")
    top = page.locator("[data-thread-deleted-top]")
    expect(top).to_have_text("This thread was deleted by ada. Threads")
    expect(top).to_be_in_viewport()
