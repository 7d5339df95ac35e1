"""A person reads a long thread's earlier messages in a real browser: the pager is a real link a
keyboard reaches and sees focused, an earlier page stays on screen while the thread changes
(pushed as that same page), and a deleted thread's undecided calls stop saying "pending"."""

import pytest
from playwright.sync_api import Page, expect

from approvals.actions.threads import do_control, do_delete_thread
from approvals.models import ApprovalStatus
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_user
from tests.test_thread_page_scale import add_requests, long_thread

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def tab_to(page: Page, name: str, *, presses: int = 60) -> None:
    """Press Tab until the focused element's text is `name` (as a keyboard user gets there)."""
    for _ in range(presses):
        page.keyboard.press("Tab")
        if page.evaluate("document.activeElement.textContent.trim()") == name:
            return
    raise AssertionError(f"Tab never reached {name!r}")


def test_a_keyboard_user_follows_the_pager_to_earlier_messages_and_back(
    page: Page, live_server_url: str
) -> None:
    make_user("olga", "operator")
    gate = long_thread(turns=120)  # 242 messages: the page shows the newest 100
    log_in(page, live_server_url, "olga")
    page.goto(f"{live_server_url}/threads/{gate.thread_id}/")
    expect(page.get_by_text("turn 119", exact=True)).to_be_visible()
    expect(page.get_by_text("turn 60", exact=True)).to_have_count(0)

    tab_to(page, "↑ Earlier messages")
    focused = page.locator(".conversation-pages a:focus-visible")
    expect(focused).to_have_count(1)
    assert focused.evaluate("a => getComputedStyle(a).outlineStyle") != "none"
    page.keyboard.press("Enter")

    page.wait_for_url(f"**/threads/{gate.thread_id}/?messages_before=142")
    expect(page.get_by_text("turn 60", exact=True)).to_be_visible()
    expect(page.get_by_text("turn 119", exact=True)).to_have_count(0)
    expect(page.locator("[data-messages-shown]")).to_contain_text("Messages 43 to 142 of 242")
    tab_to(page, "Newest messages ↓")
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/threads/{gate.thread_id}/")
    expect(page.get_by_text("turn 119", exact=True)).to_be_visible()


def test_an_earlier_page_stays_on_screen_when_the_thread_changes(page: Page, live_server_url: str) -> None:
    olga = make_user("olga", "operator")
    gate = long_thread(turns=120)
    add_requests(gate, {"call_25": ApprovalStatus.APPROVED})
    log_in(page, live_server_url, "olga")
    page.goto(f"{live_server_url}/threads/{gate.thread_id}/?messages_before=142")
    expect(page.locator("#live-status")).to_have_text("live")
    page.evaluate("window.__sameDocument = true")
    tab_to(page, "↑ Earlier messages")

    off_loop(lambda: do_control(gate.thread_id, user=olga, verb="pause"))

    expect(page.locator("#thread-status")).to_have_text("Paused")  # the push arrived
    expect(page.get_by_text("turn 25", exact=True)).to_be_visible()
    expect(page.locator(".msg-assistant", has_text="turn 25").locator(".tag")).to_have_text("approved")
    expect(page.get_by_text("turn 119", exact=True)).to_have_count(0)
    expect(page.locator("[data-messages-shown]")).to_contain_text("Messages 43 to 142 of 242")
    assert page.evaluate("window.__sameDocument") is True  # no reload happened
    # The pushed pager's link has the keyboard's focus back, not the top of the page.
    assert page.evaluate("document.activeElement.textContent.trim()") == "↑ Earlier messages"


def test_a_deleted_threads_pending_calls_say_they_will_never_be_decided(
    page: Page, live_server_url: str
) -> None:
    ada, _ = make_user("ada", "admin"), make_user("olga", "operator")
    gate = long_thread(turns=2)
    add_requests(gate, {"call_0": ApprovalStatus.PENDING, "call_1": ApprovalStatus.APPROVED})
    log_in(page, live_server_url, "olga")
    page.goto(f"{live_server_url}/threads/{gate.thread_id}/")
    expect(page.locator("#live-status")).to_have_text("live")
    expect(page.locator(".tool-call .tag")).to_have_text(["pending", "pending", "approved"])

    off_loop(lambda: do_delete_thread(gate.thread_id, user=ada))

    expect(page.locator("[data-thread-deleted-top]")).to_be_visible()
    never = "never decided: thread deleted"
    expect(page.locator(".tool-call .tag")).to_have_text([never, never, "approved"])
