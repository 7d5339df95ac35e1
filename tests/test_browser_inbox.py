"""A reviewer in a real browser: the open inbox receives a new request live, and approving it
resumes the thread to completion."""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agents.examples.models import Refund
from approvals.models import ApprovalRequest
from checkpoints.models import Thread
from tests.browser import browser_fixture, log_in, off_loop, page_fixture, start_refund  # noqa: F401  (fixtures)
from tests.factories import make_user
from tests.live import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_reviewer_sees_a_new_request_live_approves_it_and_the_thread_completes(
    page: Page,
    live_server_url: str,
    celery_worker: Any,
) -> None:
    make_user("rita", "reviewer")
    log_in(page, live_server_url, "rita")
    expect(page.locator(".empty")).to_be_visible()
    expect(page.locator("#live-status")).to_have_text("live")
    page.evaluate("window.__sameDocument = true")

    thread_id = start_refund("Please refund order ORD-1001")

    row = page.locator("#inbox-list .inbox-row")
    expect(row).to_have_count(1, timeout=15_000)
    expect(row).to_contain_text("issue_refund")
    expect(row.locator(".row-link")).to_have_text("Refund $42.50 to Ada Lovelace (order ORD-1001)")
    expect(row.locator(".asked")).to_contain_text("Please refund order ORD-1001")
    expect(page.locator("#inbox-count")).to_have_text("1")
    assert page.evaluate("window.__sameDocument") is True  # arrived without a reload

    row.click()
    expect(page.locator("h1")).to_have_text("Refund $42.50 to Ada Lovelace (order ORD-1001)")
    expect(page.locator(".conversation")).to_contain_text("Please refund order ORD-1001")
    page.get_by_role("button", name="Approve", exact=True).click()

    expect(page.locator(".closed")).to_contain_text("You approved this request.")
    expect(page.locator(".conversation")).to_contain_text("Refund of $42.50 issued", timeout=15_000)
    expect(page.locator(".thread-meta .status")).to_have_text("Done")
    assert Thread.objects.get(pk=thread_id).status == "done"
    assert Refund.objects.count() == 1


def test_an_invalid_edit_shows_the_field_error_inline_and_decides_nothing(
    page: Page,
    live_server_url: str,
    celery_worker: Any,
) -> None:
    make_user("rita", "reviewer")
    start_refund("Please refund order ORD-1002")
    request_ = wait_for(ApprovalRequest.objects.first, timeout=20, message="a pending approval")
    assert request_ is not None
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/approvals/{request_.pk}/")

    page.get_by_text("Edit the arguments, then approve").click()
    page.fill("input[name='args.amount_cents']", "0")
    page.get_by_role("button", name="Approve with these arguments").click()

    expect(page.locator(".field-error")).to_have_text("Amount must be greater than 0")
    request_.refresh_from_db()
    assert request_.status == "pending"
    page.fill("input[name='args.amount_cents']", "1234")
    page.get_by_role("button", name="Approve with these arguments").click()
    expect(page.locator(".closed")).to_contain_text("You edited and approved this request.")
    wait_for(
        lambda: Refund.objects.filter(amount_cents=1234).exists(), timeout=20, message="the edited refund"
    )


def test_a_request_decided_elsewhere_disappears_from_an_open_inbox(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    from approvals.actions.decisions import check_decision, do_decide

    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    start_refund("Please refund order ORD-1003")
    request_ = wait_for(ApprovalRequest.objects.first, timeout=20, message="a pending approval")
    assert request_ is not None
    log_in(page, live_server_url, rita.username)
    expect(page.locator(f"#approval-{request_.pk}")).to_be_visible()

    off_loop(
        lambda: do_decide(
            request_, reviewer=sam, valid=check_decision(request_, user=sam, decision="approve")
        )
    )

    expect(page.locator(f"#approval-{request_.pk}")).to_have_count(0)
    expect(page.locator("#inbox-count")).to_have_text("0")
    expect(page.locator(".empty")).to_be_visible()
