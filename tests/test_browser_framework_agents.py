"""A reviewer in a real browser decides a framework agent's refund (pydantic-ai, the OpenAI Agents
SDK) like a native one: the inbox row, the conversation, an edit through the form built from the
tool's own schema."""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agents.examples.models import Refund
from checkpoints.models import Thread
from tests.browser import browser_fixture, log_in, page_fixture, start_refund  # noqa: F401  (fixtures)
from tests.factories import make_user
from tests.live import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


@pytest.mark.parametrize("agent", ["refunds_pydantic_ai", "refunds_openai_agents"])
def test_reviewer_edits_a_framework_agents_refund_in_the_browser_and_the_edited_refund_is_issued(
    page: Page, live_server_url: str, celery_worker: Any, agent: str
) -> None:
    make_user("rita", "reviewer")
    log_in(page, live_server_url, "rita")
    thread_id = start_refund("Please refund order ORD-1002", agent=agent)

    row = page.locator("#inbox-list .inbox-row")
    expect(row).to_have_count(1, timeout=15_000)
    expect(row.locator(".row-link")).to_have_text("Refund $129.99 to Grace Hopper (order ORD-1002)")
    row.click()
    expect(page.locator(".conversation")).to_contain_text("Please refund order ORD-1002")
    expect(page.locator(".conversation")).to_contain_text("lookup_order")

    page.get_by_text("Edit the arguments, then approve").click()
    page.fill("input[name='args.amount_cents']", "0")
    page.get_by_role("button", name="Approve with these arguments").click()
    expect(page.locator(".field-error")).to_have_text("Amount cents must be greater than 0")
    assert Refund.objects.count() == 0
    page.fill("input[name='args.amount_cents']", "2500")
    page.get_by_role("button", name="Approve with these arguments").click()

    expect(page.locator(".closed")).to_contain_text("You edited and approved this request.")
    expect(page.locator(".conversation")).to_contain_text("Refund of $25.00 issued", timeout=15_000)
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "done", timeout=15, message="done")
    assert list(Refund.objects.values_list("order_id", "amount_cents")) == [("ORD-1002", 2500)]
    page.screenshot(path=f"/tmp/{agent}-decision-1400.png", full_page=True)
