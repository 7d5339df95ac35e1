"""What live pushes change is read out from the page's polite live region, once per burst and
never by moving the focus: rows that leave the inbox under a reviewer, and the thread page's
status and decisions as others act."""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from approvals import events
from approvals.actions.threads import do_control
from approvals.tests.test_two_person import decide
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

QUIET_MS = 1500  # longer than a burst takes to be said


def open_live(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.locator("#live-status")).to_have_text("live")
    page.wait_for_timeout(500)  # the socket's catch-up, if any, has landed


def focused_name(page: Page) -> str:
    return page.evaluate("document.activeElement.name || document.activeElement.textContent.trim()")


def test_a_row_another_reviewer_decides_is_announced_with_who_and_focus_stays(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    first, second = off_loop(make_gate), off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/")
    page.locator("select[name=agent]").focus()

    off_loop(decide, first, sam, decision="reject", message="not now")

    expect(page.locator(f"#approval-{first.pk}")).to_have_count(0)
    region = page.locator("[data-announce]")
    expect(region).to_have_attribute("aria-live", "polite")
    expect(region).to_have_text(f"Request {first.pk} was rejected by sam and left your list")
    assert focused_name(page) == "agent"
    expect(page.locator(f"#approval-{second.pk}")).to_be_visible()


def test_a_burst_of_rows_leaving_is_announced_once_as_a_count(page: Page, live_server_url: str) -> None:
    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    gates = [off_loop(make_gate) for _ in range(3)]
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/")
    said: list[str] = []
    page.expose_function("heard", lambda text: said.append(text))
    page.evaluate(
        """() => {
            const region = document.querySelector("[data-announce]");
            new MutationObserver(() => window.heard(region.textContent))
                .observe(region, {childList: true, characterData: true, subtree: true});
        }"""
    )

    off_loop(lambda: [decide(g, sam, decision="approve") for g in gates[:2]])

    expect(page.locator("#inbox-list .inbox-row")).to_have_count(1)
    expect(page.locator("[data-announce]")).to_have_text("2 requests left your list")
    page.wait_for_timeout(QUIET_MS)
    assert said == ["2 requests left your list"]  # one announcement, not one per push


def test_the_reviewers_own_approval_is_not_announced_again_and_an_unchanged_push_says_nothing(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    first, second = off_loop(make_gate), off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/")
    page.keyboard.press("j")
    page.keyboard.press("a")
    page.keyboard.press("Enter")  # a refund is consequential: confirm it
    expect(page.locator("#inbox-notice")).to_contain_text("Approved")
    expect(page.locator(f"#approval-{first.pk}")).to_have_count(0)

    off_loop(events.send_inbox_changed, queues=[second.queue], request_ids=[second.pk])  # same row again
    page.wait_for_timeout(QUIET_MS)
    region = page.locator("[data-announce]")
    expect(region).to_have_text("")  # #inbox-notice said it; the push that removed the row says nothing

    off_loop(decide, second, sam, decision="approve")
    expect(region).to_have_text(f"Request {second.pk} was approved by sam and left your list")


def test_an_operator_pausing_the_thread_is_announced_on_its_page_and_focus_stays(
    page: Page, live_server_url: str
) -> None:
    make_user("otto", "operator")
    olga = make_user("olga", "operator")
    request_ = off_loop(make_gate)
    thread_id = request_.thread_id
    log_in(page, live_server_url, "otto")
    open_live(page, f"{live_server_url}/threads/{thread_id}/")
    compare = page.get_by_role("link", name="Compare checkpoints")
    compare.focus()

    off_loop(events.on_thread_changed, None, thread_id=thread_id)  # a push that changes nothing seen
    page.wait_for_timeout(QUIET_MS)
    region = page.locator("[data-announce]")
    expect(region).to_have_text("")

    off_loop(lambda: do_control(thread_id, user=olga, verb="pause"))
    expect(page.locator(".thread-meta .status")).to_have_text("Paused")
    expect(region).to_have_attribute("aria-live", "polite")
    expect(region).to_have_text("Thread paused by olga")
    expect(compare).to_be_focused()


def test_a_request_decided_by_someone_is_announced_on_the_thread_page(
    page: Page, live_server_url: str
) -> None:
    make_user("otto", "operator")
    sam = make_user("sam", "reviewer")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "otto")
    open_live(page, f"{live_server_url}/threads/{request_.thread_id}/")

    off_loop(decide, request_, sam, decision="reject", message="not now")

    expect(page.locator("[data-announce]")).to_contain_text(f"Request {request_.pk} rejected by sam")
    expect(page.locator("[data-announce]")).to_contain_text("Thread is running")


def test_a_status_that_changes_and_changes_back_within_a_burst_is_not_announced(
    page: Page, live_server_url: str
) -> None:
    make_user("otto", "operator")
    olga = make_user("olga", "operator")
    request_ = off_loop(make_gate)
    thread_id = request_.thread_id
    log_in(page, live_server_url, "otto")
    open_live(page, f"{live_server_url}/threads/{thread_id}/")

    def pause_and_resume() -> Any:
        do_control(thread_id, user=olga, verb="pause")
        return do_control(thread_id, user=olga, verb="resume")

    off_loop(pause_and_resume)
    expect(page.locator(".thread-meta .status")).to_have_text("Waiting")
    page.wait_for_timeout(QUIET_MS)
    expect(page.locator("[data-announce]")).to_have_text("")
