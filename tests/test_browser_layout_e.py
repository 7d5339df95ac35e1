"""What a person sees first, at 1400 px and on a 400 px phone: the request a waiting thread waits
for is one tap away from its thread page, an empty thread list says what to do, the history marks
only the checkpoint that is open, and phone-sized buttons are big enough to tap."""

import pytest
from playwright.sync_api import Browser, Page, expect

from approvals.actions.threads import do_fork_thread
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_a_waiting_threads_page_links_to_the_request_it_waits_for_within_the_first_screen(
    browser: Browser, live_server_url: str
) -> None:
    make_user("olga", "operator")
    gate = off_loop(lambda: make_gate(args={"order_id": "ORD-1002", "amount_cents": 4250}))
    context = browser.new_context(viewport={"width": 400, "height": 800})
    page = context.new_page()
    try:
        log_in(page, live_server_url, "olga")
        page.goto(f"{live_server_url}/threads/{gate.thread_id}/")
        expect(page.locator("#live-status")).to_have_text("live")  # pushes swap the conversation in
        link = page.get_by_role("link", name="Open the request →")
        expect(link).to_be_in_viewport(ratio=1)  # on the first screen, no scrolling
        link.click()
        page.wait_for_url(f"**/approvals/{gate.pk}/")
        # The decision page is the request: its conversation does not link to itself.
        expect(page.locator(".conversation [data-undecided]")).to_be_visible()
        expect(page.get_by_role("link", name="Open the request →")).to_have_count(0)
    finally:
        context.close()


def test_an_empty_thread_list_says_what_to_do(page: Page, live_server_url: str) -> None:
    make_user("olga", "operator")
    log_in(page, live_server_url, "olga")
    page.goto(f"{live_server_url}/threads/")
    expect(page.locator("[data-no-threads]")).to_have_text(
        "No threads yet. Start a run above: its thread appears here."
    )

    off_loop(lambda: make_gate(user_input="Please refund order ORD-1001"))
    page.goto(f"{live_server_url}/threads/?q=nothing-like-this")
    expect(page.locator("[data-no-threads]")).to_contain_text("No threads match these filters.")
    page.get_by_role("link", name="Clear the filters").click()
    expect(page.locator(".thread-row")).to_have_count(1)


def test_the_history_highlights_only_the_open_checkpoint_not_the_branches_under_it(
    page: Page, live_server_url: str
) -> None:
    olga = make_user("olga", "operator")
    gate = off_loop(lambda: make_gate(user_input="Please refund order ORD-1004"))
    first = Checkpoint.objects.get(thread_id=gate.thread_id, step=0)
    values = get_backend().get(thread_id=gate.thread_id, checkpoint_id=str(first.pk)).values
    values["messages"][0]["content"] = "Please refund order ORD-1003"
    off_loop(lambda: do_fork_thread(gate.thread_id, user=olga, checkpoint_id=str(first.pk), values=values))

    log_in(page, live_server_url, "olga")
    page.goto(f"{live_server_url}/threads/{gate.thread_id}/checkpoints/{first.pk}/")
    selected = page.locator(".node.selected")
    expect(selected).to_have_count(1)
    nested = selected.locator(".branch.old .node a")  # the earlier branch, drawn under step 0
    expect(nested).to_have_count(1)
    background = "a => getComputedStyle(a).backgroundColor"
    assert selected.locator("> a").evaluate(background) != "rgba(0, 0, 0, 0)"
    assert nested.evaluate(background) == "rgba(0, 0, 0, 0)"


def test_on_a_phone_small_buttons_are_tall_enough_to_tap_and_keyboard_hints_are_gone(
    browser: Browser, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    gate = off_loop(lambda: make_gate(args={"order_id": "ORD-1002", "amount_cents": 4250}))
    context = browser.new_context(viewport={"width": 400, "height": 800})
    page = context.new_page()
    try:
        log_in(page, live_server_url, "rita")
        expect(page.locator("#live-status")).to_have_text("live")
        claim = page.locator(".inbox-row").first.get_by_role("button", name="Claim")
        expect(claim).to_be_in_viewport(ratio=1)  # the queues no longer fill the first screen
        assert claim.evaluate("b => b.getBoundingClientRect().height") >= 40
        expect(page.locator(".shortcuts")).to_be_hidden()
        page.goto(f"{live_server_url}/approvals/{gate.pk}/")
        expect(page.locator("summary kbd").first).to_be_hidden()
        expect(page.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    finally:
        context.close()
