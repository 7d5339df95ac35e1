"""A reviewer reads further back in the conversation a request was asked in, in a real browser:
the decision page's pager is a real link a keyboard reaches and sees focused, it stays on the
decision page, and the gated call stays in sight on every page.
Set SHOTS_DIR to keep a screenshot of the pager at 1400 and 400 px wide."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import Locator, Page, expect

from tests.browser import browser_fixture, log_in, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_user
from tests.test_browser_thread_pager import tab_to
from tests.test_decision_page_scale import asked_deep

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def shoot(page: Page, name: str, *, at: Locator) -> None:
    """The screen around `at`, at 1400 and 400 px wide (SHOTS_DIR)."""
    if not os.environ.get("SHOTS_DIR"):
        return
    size = page.viewport_size or {"width": 1280, "height": 860}
    for width in (1400, 400):
        page.set_viewport_size({"width": width, "height": 900})
        at.scroll_into_view_if_needed()
        page.screenshot(path=str(Path(os.environ["SHOTS_DIR"]) / f"{name}-{width}.png"))
    page.set_viewport_size(size)


def test_a_keyboard_user_reads_earlier_asked_messages_without_leaving_the_decision_page(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    item = asked_deep(turns=120)  # 244 messages as asked: the page shows the newest 100
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/approvals/{item.pk}/")
    asked = page.locator(".asked-conversation")
    expect(asked.get_by_text("turn 119", exact=True)).to_be_visible()
    expect(asked.get_by_text("the gated call", exact=True)).to_be_visible()
    expect(asked.get_by_text("turn 60", exact=True)).to_have_count(0)
    shoot(page, "decision-pager-newest", at=asked.locator("[data-asked-shown]"))

    tab_to(page, "↑ Earlier messages", presses=120)
    focused = asked.locator(".conversation-pages a:focus-visible")
    expect(focused).to_have_count(1)
    assert focused.evaluate("a => getComputedStyle(a).outlineStyle") != "none"
    page.keyboard.press("Enter")

    page.wait_for_url(f"**/approvals/{item.pk}/?asked_before=144")
    expect(page.locator(f"#decision-panel-{item.pk}")).to_be_visible()  # still the decision page
    expect(asked.get_by_text("turn 60", exact=True)).to_be_visible()
    expect(asked.get_by_text("turn 119", exact=True)).to_have_count(0)
    expect(asked.locator("[data-asked-shown]")).to_contain_text("Messages 45 to 144 of 244")
    gate = asked.locator("[data-asked-gate] + .conversation")
    expect(gate.get_by_text("the gated call", exact=True)).to_be_visible()
    expect(gate.locator(".tag")).to_have_text("approved")
    shoot(page, "decision-pager-earlier", at=asked.locator("[data-asked-gate]"))

    tab_to(page, "Newest messages ↓", presses=200)
    page.keyboard.press("Enter")
    page.wait_for_url(f"**/approvals/{item.pk}/")
    expect(asked.get_by_text("turn 119", exact=True)).to_be_visible()
