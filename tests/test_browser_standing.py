"""A reviewer in a real browser approves a refund "and keeps approving on this thread": the
next refund the agent proposes on that thread is approved automatically by the standing
decision, and the thread page shows it and revokes it."""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agents.examples.models import Refund
from approvals.actions.threads import do_continue_thread
from approvals.models import ApprovalRequest, ApprovalStatus, Policy
from checkpoints.models import Thread
from tests.browser import browser_fixture, log_in, off_loop, page_fixture, start_refund  # noqa: F401  (fixtures)
from tests.factories import make_user
from tests.live import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_a_standing_approval_from_the_decision_page_approves_the_next_call_on_the_thread(
    page: Page,
    live_server_url: str,
    celery_worker: Any,
) -> None:
    make_user("rita", "reviewer")
    olga = make_user("olga", "operator")
    thread_id = start_refund("Please refund order ORD-1001")
    first = wait_for(ApprovalRequest.objects.first, timeout=20, message="a pending approval")
    assert first is not None

    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/approvals/{first.pk}/")
    page.get_by_text("Approve, and keep approving on this thread").click()
    expect(page.locator("input[name=standing][value=tool]")).to_be_checked()
    page.locator("[data-standing-submit]").click()
    expect(page.locator(".closed")).to_contain_text("You approved this request.")
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "done", timeout=20, message="thread done")

    off_loop(do_continue_thread, thread_id, user=olga, text="Please also refund order ORD-1002")
    second = wait_for(
        lambda: ApprovalRequest.objects.exclude(pk=first.pk).filter(thread_id=thread_id).first(),
        timeout=20,
        message="the second refund's request",
    )
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "done", timeout=20, message="done again")
    assert second is not None
    second.refresh_from_db()
    standing = Policy.objects.get(thread_id=thread_id)
    assert (second.status, second.decided_by, second.policy_id) == (
        ApprovalStatus.APPROVED,
        None,
        standing.pk,
    )
    assert Refund.objects.count() == 2

    page.goto(f"{live_server_url}/threads/{thread_id}/")
    row = page.locator(f'[data-standing-id="{standing.pk}"]')
    expect(row).to_contain_text("approved for the rest of this thread by rita")
    expect(page.locator(".policy-note").first).to_contain_text("approved automatically by policy")
    page.once("dialog", lambda dialog: dialog.accept())
    row.get_by_role("button", name="Revoke").click()
    expect(page.locator(".alert")).to_contain_text("Revoked")
    assert not Policy.objects.filter(thread_id=thread_id).exists()
