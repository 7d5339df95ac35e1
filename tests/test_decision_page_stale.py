"""An open decision or thread page never offers what can no longer be done: at the request's
deadline, after a claim someone else made first, once the server refuses its socket, or once its
thread is deleted, it says so without a reload (a real browser, the live server)."""

import re
from datetime import timedelta

import pytest
from django.contrib.auth.models import Group
from django.utils import timezone
from playwright.sync_api import Browser, Page, WebSocketRoute, expect

from approvals.actions.expiry import do_expire_due
from approvals.actions.threads import do_delete_thread
from approvals.models import ApprovalRequest
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

GONE = "is no longer available to you: it was deleted, or your access to it was removed."
DECIDE = ("Approve", "Approve with these arguments", "Reject", "Claim")


def open_live(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.locator("#live-status")).to_have_text("live")
    page.wait_for_timeout(500)  # the socket's catch-up, if any, has landed


def says_gone(page: Page, text: str) -> None:
    notice = page.locator("[data-live-gone]")
    expect(notice).to_be_visible(timeout=15_000)
    expect(notice.get_by_text(text)).to_be_visible()


def offers_nothing(page: Page) -> None:
    for name in DECIDE:
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)


def test_at_its_deadline_an_open_page_says_it_expired_and_the_sweeps_escalation_replaces_that(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    request_ = off_loop(make_gate)
    ApprovalRequest.objects.filter(pk=request_.pk).update(
        expires_at=timezone.now() + timedelta(seconds=8), expiry_action="escalate", escalate_to="supervisors"
    )
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_visible()

    # No reload, no push: the sweep has not run yet.
    expired = "This request expired: nobody decided it in time; it is being escalated to supervisors."
    expect(page.locator("[data-expired]")).to_contain_text(expired, timeout=15_000)
    offers_nothing(page)

    assert off_loop(do_expire_due) == 1  # its push shows the escalated request, to be decided again
    expect(page.locator(".request-status .tag.escalated")).to_have_text("escalated from refunds")
    expect(page.locator("[data-expired]")).to_have_count(0)
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_visible()


def test_after_a_claim_someone_made_first_the_panel_agrees_with_the_status_line(
    page: Page, browser: Browser, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    bob = make_user("bob", "reviewer")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    # Bob's claim lands just before Rita's click, its push not yet on her page (written without one).
    now = timezone.now()
    ApprovalRequest.objects.filter(pk=request_.pk).update(claimed_by=bob, claimed_at=now, claim_active_at=now)

    page.get_by_role("button", name="Claim", exact=True).click()  # a 409

    expect(page.locator("[data-held-by]")).to_contain_text("Waiting for bob, who claimed this request")
    expect(page.locator(".request-status")).to_contain_text("claimed by bob")
    offers_nothing(page)

    # Bob releases it from his own page: both lines give Rita her buttons back, and agree.
    other = browser.new_context(viewport={"width": 1280, "height": 860})
    bobs = other.new_page()
    log_in(bobs, live_server_url, "bob")
    open_live(bobs, f"{live_server_url}/approvals/{request_.pk}/")
    bobs.get_by_role("button", name="Release").click()
    expect(page.locator("[data-held-by]")).to_have_count(0)
    expect(page.get_by_role("button", name="Claim", exact=True)).to_be_visible()
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    other.close()


def test_a_page_whose_reviewer_loses_the_queue_says_it_is_no_longer_available_and_stops_retrying(
    page: Page, live_server_url: str
) -> None:
    rita = make_user("rita", "reviewer", queues=("refunds",))
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")

    rita.groups.remove(Group.objects.get(name="refunds-team"))  # within LIVE_REJOIN_S: a 4403

    says_gone(page, f"This request {GONE}")
    offers_nothing(page)
    expect(page.locator(".live-status")).to_have_text("live updates ended")
    opened = len(sockets)
    page.wait_for_timeout(3000)
    assert len(sockets) == opened  # no reconnecting


def test_a_page_whose_socket_was_down_when_its_thread_was_deleted_says_so_when_it_comes_back(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    ada = make_user("ada", "admin")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    # The network between the page and the server: it passes everything until it goes down.
    routes: list[WebSocketRoute] = []
    down = {"now": False}

    def network(route: WebSocketRoute) -> None:
        routes.append(route)
        if not down["now"]:
            route.connect_to_server()

    page.route_web_socket(re.compile(r"/ws/threads/"), network)
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    down["now"] = True
    routes[0].close(code=1001)  # the page's end goes away; reconnects reach no server
    expect(page.locator("#live-status")).to_have_text("live")  # ...the page thinks (a mocked socket)
    page.wait_for_timeout(500)

    off_loop(lambda: do_delete_thread(request_.thread_id, user=ada))  # its push reaches no page
    down["now"] = False
    routes[-1].close(code=1001)  # back: the reconnect is refused

    says_gone(page, f"This request {GONE}")
    offers_nothing(page)


def test_a_deleted_threads_conversation_column_says_deleted_not_waiting(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    ada = make_user("ada", "admin")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    status = page.locator("#thread-live .thread-meta .status")
    expect(status).to_have_text("Waiting")

    off_loop(lambda: do_delete_thread(request_.thread_id, user=ada))

    expect(page.locator("[data-thread-deleted]")).to_be_visible()
    expect(status).to_have_text("Deleted")
    page.wait_for_timeout(1500)  # closed for good: no reconnect tells it otherwise
    expect(page.locator(".live-status")).to_have_text("thread deleted")
    expect(page.locator("[data-live-gone]")).to_be_hidden()


def test_an_operators_thread_page_says_it_is_gone_when_its_socket_is_refused(
    page: Page, live_server_url: str
) -> None:
    olga = make_user("olga", "operator")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "olga")
    open_live(page, f"{live_server_url}/threads/{request_.thread_id}/")
    expect(page.get_by_role("button", name="Pause")).to_be_visible()

    olga.groups.clear()  # within LIVE_REJOIN_S: a 4403

    says_gone(page, f"This thread {GONE}")
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    expect(page.get_by_role("button", name="Cancel")).to_have_count(0)


def test_an_inbox_whose_reviewer_loses_every_role_stops_offering_claims_and_retrying(
    page: Page, live_server_url: str
) -> None:
    rita = make_user("rita", "reviewer")
    off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    sockets: list[str] = []
    page.on("websocket", lambda ws: sockets.append(ws.url))
    open_live(page, f"{live_server_url}/")
    expect(page.get_by_role("button", name="Claim", exact=True)).to_be_visible()

    rita.groups.clear()  # within LIVE_REJOIN_S: a 4403

    expect(page.locator(".live-status")).to_have_text("live updates ended — reload the page", timeout=15_000)
    expect(page.get_by_role("button", name="Claim", exact=True)).to_have_count(0)
    opened = len(sockets)
    page.wait_for_timeout(3000)
    assert len(sockets) == opened  # no reconnecting
