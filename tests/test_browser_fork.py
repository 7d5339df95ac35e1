"""An operator in a real browser forks from an earlier checkpoint with an edited state, then sees
the new branch in the history tree and the change in the diff."""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agents.actions import check_start_thread, do_start_thread
from approvals.models import ApprovalRequest
from checkpoints.models import Checkpoint, Thread
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_user
from tests.live import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_operator_forks_with_an_edit_and_sees_the_branch_and_the_diff(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("olga", "operator")
    text = "Please refund order ORD-1001"
    thread_id = off_loop(
        lambda: (
            do_start_thread(
                agent=check_start_thread(agent="refunds", text=text, thread_id=None),
                text=text,
                thread_id=None,
                actor="user:olga",
            )[0].id
        )
    )
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "waiting", timeout=20, message="the gate")
    first = Checkpoint.objects.get(thread_id=thread_id, step=0)
    log_in(page, live_server_url, "olga")

    page.goto(f"{live_server_url}/threads/{thread_id}/checkpoints/{first.pk}/")
    expect(page.locator("h1")).to_contain_text("Step 0")
    editor = page.locator("textarea[name=values]")
    editor.fill(editor.input_value().replace("ORD-1001", "ORD-1003"))
    page.get_by_role("button", name="Review the fork…").click()
    page.get_by_role("button", name="Fork from step 0 with these edits").click()

    expect(page.locator(".alert.success")).to_contain_text("Forked")
    expect(page.locator(".branch-label")).to_contain_text("earlier branch, from step 0")
    # The worker may already have run steps past the fork, so look for the fork node on the
    # current branch rather than expecting it to still be the head.
    expect(page.locator(".branch.current .node .source-fork").first).to_be_visible()
    wait_for(
        lambda: any(
            r.args["order_id"] == "ORD-1003" for r in ApprovalRequest.objects.filter(status="pending")
        ),
        timeout=20,
        message="a fresh approval for the edited order",
    )
    # args is a text column (encrypted with a key set): match in Python.
    [old] = [r for r in ApprovalRequest.objects.all() if r.args["order_id"] == "ORD-1001"]
    assert old.status == "superseded"

    page.goto(f"{live_server_url}/threads/{thread_id}/diff/?from={old.checkpoint_id}")
    row = page.locator("tr.diff-changed", has_text="messages[0].content")
    expect(row).to_contain_text("ORD-1001")
    expect(row).to_contain_text("ORD-1003")
