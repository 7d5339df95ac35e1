"""The thread page stays true without a reload: its history, status and operator buttons follow
what happens elsewhere, and a fork hangs from the checkpoint it left, labelled with its edit."""

from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agents.actions import check_start_thread, do_fork, do_start_thread
from approvals.actions.threads import do_control
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, Thread
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_user
from tests.live import wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def start_waiting_refund(text: str) -> str:
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
    return thread_id


def test_the_history_status_and_buttons_update_live_when_another_operator_acts(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    olga, _ = make_user("olga", "operator"), make_user("otto", "operator")
    thread_id = start_waiting_refund("Please refund order ORD-1001")
    log_in(page, live_server_url, "otto")
    page.goto(f"{live_server_url}/threads/{thread_id}/")
    expect(page.locator("#live-status")).to_have_text("live")
    page.evaluate("window.__sameDocument = true")
    expect(page.get_by_role("button", name="Pause")).to_be_visible()

    off_loop(lambda: do_control(thread_id, user=olga, verb="pause"))

    expect(page.locator(".thread-meta .status")).to_have_text("Paused")
    expect(page.get_by_role("button", name="Resume")).to_be_visible()
    expect(page.get_by_role("button", name="Pause")).to_have_count(0)
    expect(page.locator(".paused-by")).to_contain_text("Paused by olga")

    first = Checkpoint.objects.get(thread_id=thread_id, step=0)
    values = get_backend().get(thread_id=thread_id, checkpoint_id=str(first.pk)).values
    values["messages"][0]["content"] = "Please refund order ORD-1003"
    off_loop(lambda: do_fork(thread_id, checkpoint_id=str(first.pk), values=values, actor="user:olga"))

    step0 = page.locator('.branch.current > .line > .node[data-step="0"]')
    expect(step0.locator("> .history .branch-label")).to_have_text("earlier branch, from step 0")
    expect(page.locator(".change-note").first).to_contain_text("forked by olga from step 0")
    expect(page.locator(".change-note").first).to_contain_text("ORD-1003")
    assert page.evaluate("window.__sameDocument") is True  # no reload happened

    # The pushed buttons work: Resume is not stale, and carries a CSRF token.
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "waiting", timeout=20, message="fork gate")
    expect(page.get_by_role("button", name="Pause")).to_be_visible()
    page.get_by_role("button", name="Pause").click()
    expect(page.locator(".alert.success")).to_contain_text("paused")
    assert Thread.objects.get(pk=thread_id).status == "paused"
