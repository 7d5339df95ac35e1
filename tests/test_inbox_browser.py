"""Reviewers in real browsers: two at once, claims, parallel approvals, supersession, keyboard, ledger."""

import re
from collections.abc import Iterator
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from agents.examples.models import Refund
from approvals.actions.threads import do_control
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.backends import get_backend
from checkpoints.models import Thread
from tests.browser import browser_fixture, csp_violations, log_in, off_loop, page_fixture, start_refund  # noqa: F401  (fixtures)
from tests.factories import api_for, make_gate, make_user
from tests.live import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

LIVE_MS = 1_000  # "within a second"


@pytest.fixture
def other_page(browser: Browser) -> Iterator[Page]:
    """A second reviewer's own browser (a separate context: its own cookies and session)."""
    context = browser.new_context(viewport={"width": 1280, "height": 860})
    violations = csp_violations(context)
    page = context.new_page()
    page.set_default_timeout(10_000)
    yield page
    context.close()
    assert violations == [], "the page broke its Content-Security-Policy"


def pending(count: int) -> list[ApprovalRequest]:
    wait_for(
        lambda: ApprovalRequest.objects.count() == count, timeout=20, message=f"{count} pending requests"
    )
    return list(ApprovalRequest.objects.order_by("id"))


def wait_done(thread_id: str) -> Thread:
    done = Thread.objects.filter(pk=thread_id, status="done")
    wait_for(done.exists, timeout=20, message="the thread to finish")
    return Thread.objects.get(pk=thread_id)


def test_two_reviewers_one_decides_the_others_inbox_updates_and_a_late_click_is_refused(
    page: Page, other_page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("rita", "reviewer")
    make_user("sam", "reviewer")
    log_in(page, live_server_url, "rita")
    log_in(other_page, live_server_url, "sam")
    for p in (page, other_page):
        expect(p.locator("#live-status")).to_have_text("live")

    thread_id = start_refund("Please refund order ORD-1001")
    for p in (page, other_page):
        expect(p.locator("#inbox-list .inbox-row")).to_have_count(1, timeout=15_000)
    [request_] = pending(1)
    rita_row, sam_row = (
        page.locator(f"#approval-{request_.pk}"),
        other_page.locator(f"#approval-{request_.pk}"),
    )

    # Sam claims it: Rita sees who within a second; Sam releases it again.
    sam_row.get_by_role("button", name="Claim").click()
    expect(sam_row).to_contain_text("claimed by you")
    expect(rita_row).to_contain_text("claimed by sam", timeout=LIVE_MS)
    expect(page.locator("#inbox-queues [data-queue=refunds]")).to_contain_text("1 claimed")
    sam_row.get_by_role("button", name="Release").click()
    expect(rita_row).not_to_contain_text("claimed by", timeout=LIVE_MS)

    # Sam opens the request in a tab whose live updates never arrive (a slow or dropped socket).
    late = other_page.context.new_page()
    late.route_web_socket(re.compile(r".*/ws/.*"), lambda ws: None)
    late.goto(f"{live_server_url}/approvals/{request_.pk}/")

    page.goto(f"{live_server_url}/approvals/{request_.pk}/")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(".closed")).to_contain_text("You approved this request.")
    expect(sam_row).to_have_count(0, timeout=LIVE_MS)
    expect(other_page.locator("#inbox-count")).to_have_text("0")

    late.get_by_role("button", name="Approve", exact=True).click()
    expect(late.locator(".alert.error")).to_have_text("Already approved by rita.")
    wait_done(thread_id)
    assert Refund.objects.count() == 1


def test_parallel_requests_are_decided_in_any_order_by_two_reviewers_and_the_thread_resumes_once(
    page: Page, other_page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("rita", "reviewer")
    make_user("sam", "reviewer")
    thread_id = start_refund("Please refund orders ORD-1001 and ORD-1003")
    first, second = pending(2)
    log_in(page, live_server_url, "rita")
    log_in(other_page, live_server_url, "sam")
    expect(page.locator("#inbox-list .inbox-row")).to_have_count(2)

    other_page.goto(f"{live_server_url}/approvals/{second.pk}/")  # the later one first
    other_page.get_by_text("Reject, with a reason for the agent").click()
    other_page.fill("textarea[name=message]", "Already refunded last week")
    other_page.get_by_role("button", name="Reject").click()
    expect(other_page.locator(".closed")).to_contain_text("You rejected this request.")
    expect(page.locator("#inbox-list .inbox-row")).to_have_count(1, timeout=LIVE_MS)
    assert Thread.objects.get(pk=thread_id).status == "waiting"

    page.goto(f"{live_server_url}/approvals/{first.pk}/")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator(".conversation")).to_contain_text("Already refunded last week", timeout=15_000)

    thread = wait_done(thread_id)
    assert list(Refund.objects.values_list("order_id", flat=True)) == [first.args["order_id"]]
    resumed = [c for c in get_backend().list(thread_id=thread.id) if c.parent_id == str(first.checkpoint_id)]
    assert len(resumed) == 1


def test_a_reviewer_with_the_request_open_is_told_when_an_operator_cancels_the_thread(
    page: Page, live_server_url: str
) -> None:
    rita, olga = make_user("rita", "reviewer"), make_user("olga", "operator")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/approvals/{request_.pk}/")
    expect(page.locator("#live-status")).to_have_text("live")

    off_loop(lambda: do_control(request_.thread_id, user=olga, verb="cancel"))

    reason = "This request is no longer current: the thread was cancelled by olga."
    expect(page.locator(".closed")).to_contain_text(reason)
    late = api_for(rita, live_server_url).post(f"/approvals/{request_.pk}/decision", {"decision": "approve"})
    assert (late.status_code, late.json()["detail"]) == (409, reason)


def test_an_inbox_whose_server_went_away_reconnects_and_catches_up(page: Page, live_server_url: str) -> None:
    make_user("rita", "reviewer")
    sockets: list[Any] = []

    def through(ws: Any) -> None:
        sockets.append((ws, ws.connect_to_server()))

    page.route_web_socket(re.compile(r".*/ws/inbox/.*"), through)
    log_in(page, live_server_url, "rita")
    expect(page.locator("#live-status")).to_have_text("live")

    page_side, server_side = sockets[-1]
    page_side.close(code=1001, reason="going away")  # as when the web server restarts
    server_side.close()
    expect(page.locator("#live-status")).to_contain_text("offline")
    missed = off_loop(make_gate)  # its push went nowhere: the inbox was disconnected

    expect(page.locator(f"#approval-{missed.pk}")).to_be_visible(timeout=15_000)
    expect(page.locator("#inbox-count")).to_have_text("1")
    assert len(sockets) >= 2


def test_the_catch_up_right_after_a_page_load_does_not_redraw_an_unchanged_inbox(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    first = off_loop(make_gate)
    held: list[tuple[Any, Any]] = []
    passing: list[bool] = []

    def hold_until_marked(ws: Any) -> None:
        server = ws.connect_to_server()
        server.on_message(lambda m: ws.send(m) if passing else held.append((ws, m)))

    page.route_web_socket(re.compile(r".*/ws/inbox/.*"), hold_until_marked)
    log_in(page, live_server_url, "rita")
    page.evaluate("document.getElementById('inbox-list').dataset.marker = 'first render'")
    while not held:
        page.wait_for_timeout(50)
    passing.append(True)
    for ws, message in held:
        ws.send(message)  # the catch-up list: the same as the page shows
    page.wait_for_timeout(300)

    assert page.evaluate("document.getElementById('inbox-list').dataset.marker") == "first render"
    later = off_loop(make_gate)
    expect(page.locator(f"#approval-{later.pk}")).to_be_visible(timeout=LIVE_MS)
    expect(page.locator(f"#approval-{first.pk}")).to_be_visible()


def test_keyboard_shortcuts_move_through_the_inbox_and_decide(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("rita", "reviewer")
    first, second, third = off_loop(make_gate), off_loop(make_gate), off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    rows = page.locator("#inbox-list .inbox-row")
    expect(rows).to_have_count(3)

    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(rows.nth(1)).to_have_attribute("aria-current", "true")
    page.keyboard.press("k")
    expect(rows.nth(0)).to_have_attribute("aria-current", "true")
    page.keyboard.press("c")
    expect(rows.nth(0)).to_contain_text("claimed by you")
    page.keyboard.press("o")
    expect(page).to_have_url(f"{live_server_url}/approvals/{first.pk}/")

    page.keyboard.press("e")
    assert page.evaluate("document.activeElement.name") == "args.order_id"
    page.keyboard.press("Escape")
    page.keyboard.press("r")
    expect(page.locator("details[data-key=r]")).to_have_attribute("open", "")
    page.keyboard.type("a reason typed here triggers nothing")
    page.keyboard.press("Escape")
    expect(page.locator(".closed")).to_have_count(0)
    page.keyboard.press("a")
    expect(page.locator("dialog.confirm-approve")).to_contain_text("consequential")  # a refund
    page.keyboard.press("Enter")
    expect(page.locator(".closed")).to_contain_text("You approved this request.")

    page.keyboard.press("j")
    expect(page).to_have_url(f"{live_server_url}/approvals/{second.pk}/")
    page.keyboard.press("j")
    expect(page).to_have_url(f"{live_server_url}/approvals/{third.pk}/")
    page.keyboard.press("c")  # the decision page's own keys
    expect(page.get_by_text("Claimed by you")).to_be_visible()
    page.keyboard.press("k")
    expect(page).to_have_url(f"{live_server_url}/approvals/{second.pk}/")


def test_enter_on_a_focused_link_or_button_is_that_controls_not_the_selected_rows(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    off_loop(make_gate)
    second = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    rows = page.locator("#inbox-list .inbox-row")
    expect(rows).to_have_count(2)
    page.keyboard.press("j")
    expect(rows.nth(0)).to_have_attribute("aria-current", "true")

    rows.nth(1).locator('button[data-key="c"]').focus()
    page.keyboard.press("Enter")  # it opened the selected row's page instead
    expect(rows.nth(1)).to_contain_text("claimed by you")
    assert ApprovalRequest.objects.get(pk=second.pk).claimed_by is not None
    page.get_by_role("link", name="Threads", exact=True).focus()
    page.keyboard.press("Enter")
    expect(page).to_have_url(f"{live_server_url}/threads/")


def test_an_admin_filters_the_ledger_and_downloads_it_as_csv(page: Page, live_server_url: str) -> None:
    from approvals.actions.claims import do_claim, do_release

    rita = make_user("rita", "reviewer")
    make_user("ada", "admin")
    request_ = off_loop(make_gate)
    off_loop(lambda: do_claim(request_.pk, user=rita))
    off_loop(lambda: do_release(request_.pk, user=rita))
    log_in(page, live_server_url, "ada")

    page.get_by_role("link", name="Audit ledger →").click()
    page.fill("input[name=action]", "claim")
    page.get_by_role("button", name="Filter").click()
    expect(page.locator("table.ledger tbody tr")).to_have_count(2)
    expect(page.locator("table.ledger")).to_contain_text("claim.release")
    page.get_by_role("link", name="Verify the chain").click()
    expect(page.get_by_role("status")).to_contain_text("Chain intact: 2 events verified")

    with page.expect_download() as download:
        page.get_by_role("link", name="Export CSV").click()
    text = download.value.path().read_text()
    assert text.splitlines()[0].startswith("id,at,actor,action")
    assert text.count("claim.") == 2 and AuditEvent.objects.count() == 2
