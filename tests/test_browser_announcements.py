"""What live pushes change is read out from the page's polite live region, once per burst and
never by moving the focus: rows that leave the inbox under a reviewer, and the thread page's
status and decisions as others act."""

import re
from typing import Any

import pytest
from django.conf import settings as django_settings
from playwright.sync_api import Page, WebSocketRoute, expect

from approvals import events
from approvals.actions.threads import do_control
from approvals.actions.undo import do_undo
from approvals.tests.test_two_person import decide
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user
from tests.test_live_rejoin import flush_redis

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

QUIET_MS = 1500  # longer than a burst takes to be said
REJOIN_MS = (django_settings.LIVE_REJOIN_S + 4) * 1000  # one re-join period, then a render


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


def test_the_reviewers_own_undo_is_announced_as_an_undo_not_as_a_new_request(
    page: Page, live_server_url: str, settings: Any
) -> None:
    settings.DECISION_UNDO_S = 60  # the decisions below are made here, in the test's process
    rita = make_user("rita", "reviewer")
    first, second = off_loop(make_gate), off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/")
    off_loop(decide, first, rita, decision="approve")  # from her decision page, say, or the API
    expect(page.locator(f"#approval-{first.pk}")).to_have_count(0)
    page.wait_for_timeout(QUIET_MS)
    region = page.locator("[data-announce]")
    expect(region).to_have_text("")  # her own decision: not read out

    off_loop(do_undo, first.pk, user=rita)

    expect(page.locator(f"#approval-{first.pk}")).to_be_visible()
    expect(region).to_have_text(f"Your decision on request {first.pk} was undone; it is back in your list")
    expect(page.locator(f"#approval-{second.pk}")).to_be_visible()


def test_another_reviewers_undo_is_announced_with_who_undid_it(
    page: Page, live_server_url: str, settings: Any
) -> None:
    settings.DECISION_UNDO_S = 60
    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/")
    region = page.locator("[data-announce]")
    off_loop(decide, request_, sam, decision="reject", message="not now")
    expect(region).to_have_text(f"Request {request_.pk} was rejected by sam and left your list")

    off_loop(do_undo, request_.pk, user=sam)

    expect(region).to_have_text(f"sam undid their decision on request {request_.pk}; it is back in your list")
    expect(page.locator(f"#approval-{request_.pk}")).to_contain_text("claimed by sam")


def test_rows_that_left_while_the_socket_was_out_of_its_group_are_announced_on_the_resync(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    first, second = off_loop(make_gate), off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/")
    page.locator("select[name=agent]").focus()
    off_loop(flush_redis)  # the socket is dropped from its group: the push below reaches nobody

    off_loop(decide, first, sam, decision="reject", message="not now")

    # The re-join re-renders the whole list from the database, and says what left.
    expect(page.locator(f"#approval-{first.pk}")).to_have_count(0, timeout=REJOIN_MS)
    region = page.locator("[data-announce]")
    expect(region).to_have_text(f"Request {first.pk} was rejected by sam and left your list")
    assert focused_name(page) == "agent"
    expect(page.locator(f"#approval-{second.pk}")).to_be_visible()


def test_rows_that_left_and_came_back_while_the_page_was_offline_are_announced_when_it_reconnects(
    page: Page, live_server_url: str, settings: Any
) -> None:
    settings.DECISION_UNDO_S = 60
    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    gone, undone, stays = off_loop(make_gate), off_loop(make_gate), off_loop(make_gate)
    off_loop(decide, undone, sam, decision="approve")  # decided before the page opened
    log_in(page, live_server_url, "rita")
    # The network between the page and the server: it passes everything until it goes down.
    routes: list[WebSocketRoute] = []
    down = {"now": False}

    def network(route: WebSocketRoute) -> None:
        routes.append(route)
        if not down["now"]:
            route.connect_to_server()

    page.route_web_socket(re.compile(r"/ws/inbox/"), network)
    open_live(page, f"{live_server_url}/")
    expect(page.locator("#inbox-list .inbox-row")).to_have_count(2)
    down["now"] = True
    routes[0].close(code=1001)  # the page's end goes away; reconnects reach no server
    page.wait_for_timeout(500)

    off_loop(decide, gone, sam, decision="reject", message="not now")
    off_loop(do_undo, undone.pk, user=sam)
    down["now"] = False
    routes[-1].close(code=1001)  # back: the page reconnects and catches up

    expect(page.locator(f"#approval-{gone.pk}")).to_have_count(0)
    expect(page.locator(f"#approval-{undone.pk}")).to_be_visible()
    region = page.locator("[data-announce]")
    expect(region).to_have_text(
        f"sam undid their decision on request {undone.pk}; it is back in your list. "
        f"Request {gone.pk} was rejected by sam and left your list"
    )
    expect(page.locator(f"#approval-{stays.pk}")).to_be_visible()


def test_a_row_that_left_is_announced_on_a_reconnect_even_when_the_server_cannot_say_why(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    gone, stays = off_loop(make_gate), off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    routes: list[WebSocketRoute] = []
    down = {"now": False}

    def network(route: WebSocketRoute) -> None:
        routes.append(route)
        if not down["now"]:
            route.connect_to_server()
            route.on_message(lambda message: None)  # the page's list of its rows is lost on the way

    page.route_web_socket(re.compile(r"/ws/inbox/"), network)
    open_live(page, f"{live_server_url}/")
    down["now"] = True
    routes[0].close(code=1001)
    page.wait_for_timeout(500)

    off_loop(decide, gone, sam, decision="approve")
    down["now"] = False
    routes[-1].close(code=1001)

    expect(page.locator(f"#approval-{gone.pk}")).to_have_count(0)
    expect(page.locator("[data-announce]")).to_have_text(f"Request {gone.pk} left your list")
    expect(page.locator(f"#approval-{stays.pk}")).to_be_visible()
