"""The inbox and the conversation pane in a browser, as the record of what was asked and decided:
a LangGraph thread's gated call carries its status (pending, then approved by whom) through a real
worker; an edited call shows the approved arguments; the inbox quotes a later turn, tags a paused
thread, and says what is wrong with its filters in sentences. Screenshots go to $SHOTS_DIR (if set)."""

import os
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from approvals.actions.decisions import check_decision, do_decide
from approvals.models import ApprovalRequest
from checkpoints.models import Thread, ThreadStatus
from tests.browser import browser_fixture, log_in, off_loop, page_fixture, start_refund  # noqa: F401
from tests.factories import make_gate, make_user
from tests.live import wait_for
from tests.test_inbox_record import gate_in_a_later_turn

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

SHOTS = os.environ.get("SHOTS_DIR", "")


def shoot(page: Page, name: str) -> None:
    """Screenshots at 1400 and 400 px wide, when SHOTS_DIR is set."""
    if not SHOTS:
        return
    for width in (1400, 400):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=Path(SHOTS) / f"{name}-{width}.png", full_page=True)
    page.set_viewport_size({"width": 1280, "height": 860})


def test_a_langgraph_threads_gated_call_shows_pending_then_who_approved_it(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("olga", "admin")
    thread_id = start_refund("Please refund order ORD-1001", agent="refunds_langgraph")
    wait_for(
        lambda: ApprovalRequest.objects.filter(thread_id=thread_id).exists(), timeout=30, message="a gate"
    )
    log_in(page, live_server_url, "olga")

    page.goto(f"{live_server_url}/threads/{thread_id}/")
    call = page.locator(".conversation .tool-call", has_text="issue_refund")
    expect(call.locator(".tag")).to_have_text("pending")
    shoot(page, "lg-thread-pending")

    request_ = ApprovalRequest.objects.get(thread_id=thread_id)
    page.goto(f"{live_server_url}/approvals/{request_.pk}/")
    page.get_by_role("button", name="Approve").first.click()
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == ThreadStatus.DONE, timeout=30, message="done")
    page.goto(f"{live_server_url}/threads/{thread_id}/")
    expect(call.locator(".tag")).to_have_text("approved by olga")
    shoot(page, "lg-thread-approved")


def test_the_inbox_and_the_conversation_show_the_record(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    rita = make_user("rita", "reviewer")
    first = off_loop(
        make_gate,
        args={"order_id": "ORD-1003", "amount_cents": 1999},
        user_input="Please refund order ORD-1003",
    )
    off_loop(
        gate_in_a_later_turn,
        first,
        said="Thanks! Also refund order ORD-1001 please",
        args={"order_id": "ORD-1001", "amount_cents": 4250},
    )
    paused = off_loop(
        make_gate, args={"order_id": "ORD-1002", "amount_cents": 12999}, user_input="Refund ORD-1002"
    )
    Thread.objects.filter(pk=paused.thread_id).update(status=ThreadStatus.PAUSED)
    edited = off_loop(
        make_gate, args={"order_id": "ORD-1002", "amount_cents": 12999}, user_input="Refund my mug"
    )

    def edit() -> None:
        valid = check_decision(
            edited, user=rita, decision="edit", args={"order_id": "ORD-1002", "amount_cents": 10000}
        )
        do_decide(edited, reviewer=rita, valid=valid)

    off_loop(edit)
    log_in(page, live_server_url, "rita")

    expect(
        page.locator(".inbox-row .asked", has_text="Thanks! Also refund order ORD-1001 please")
    ).to_have_count(1)
    expect(page.locator(f"#approval-{paused.pk} [data-thread-paused]")).to_have_text("thread paused")
    shoot(page, "inbox-record")

    page.goto(f"{live_server_url}/?agent=nope&age=9")
    expect(page.locator(".alert.error")).to_contain_text("Agent: no agent is registered as “nope”.")
    shoot(page, "inbox-bad-filters")

    wait_for(
        lambda: Thread.objects.get(pk=edited.thread_id).status == ThreadStatus.DONE,
        timeout=30,
        message="done",
    )
    page.goto(f"{live_server_url}/threads/{edited.thread_id}/")
    call = page.locator(".conversation .tool-call", has_text="issue_refund")
    # Once run, the call in the message holds the edit too (its fields in the order stored).
    expect(call.locator("pre.args").first).to_contain_text("amount_cents: 10000")
    expect(call.locator("pre.args del")).to_contain_text("amount_cents: 12999")
    shoot(page, "conversation-edited")
