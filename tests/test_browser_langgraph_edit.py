"""An operator in a real browser edits the refund a LangGraph graph proposes: the edit goes to
LangGraph's own state, and the graph asks again about the edited refund."""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from approvals.models import ApprovalRequest
from checkpoints.models import Thread
from tests.browser import browser_fixture, log_in, page_fixture, start_refund  # noqa: F401  (fixtures)
from tests.factories import make_user
from tests.live import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_operator_edits_a_langgraph_threads_proposed_refund_and_is_asked_again(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("olga", "operator")
    thread_id = start_refund("Please refund order ORD-1001", agent="refunds_langgraph")
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "waiting", timeout=30, message="the gate")
    [first] = ApprovalRequest.objects.filter(thread_id=thread_id)
    log_in(page, live_server_url, "olga")

    page.goto(f"{live_server_url}/threads/{thread_id}/state/")
    expect(page.locator("[data-edit-note]")).to_contain_text("LangGraph's update_state")
    editor = page.locator("textarea[name=values]")
    assert editor.input_value().startswith('{\n  "messages": [')  # what can be edited comes first
    # The proposed call's arguments, a JSON string inside the message (the interrupt's copy stays).
    editor.fill(editor.input_value().replace('\\"amount_cents\\": 4250', '\\"amount_cents\\": 1000'))
    page.get_by_role("button", name="Save as a new checkpoint").click()

    expect(page.locator(".alert.success")).to_contain_text("State saved")
    wait_for(
        lambda: [r.args["amount_cents"] for r in ApprovalRequest.objects.filter(status="pending")] == [1000],
        timeout=30,
        message="the graph asking again about the edited refund",
    )
    first.refresh_from_db()
    assert first.status == "superseded"
