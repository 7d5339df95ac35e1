"""Take the README's screenshots against live services: `make screenshots`.

Not collected by `make test` (the file name does not start with test_); run it by path.
"""

from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Page, expect

from agents.actions import check_start_thread, do_start_thread
from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_user
from tests.live import wait_for

OUT = Path(__file__).resolve().parent.parent / "docs" / "screenshots"
pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def start(agent: str, text: str) -> None:
    def run() -> None:
        do_start_thread(
            agent=check_start_thread(agent=agent, text=text, thread_id=None),
            text=text,
            thread_id=None,
            actor="user:olga",
        )

    off_loop(run)


def test_take_screenshots(page: Page, live_server_url: str, celery_worker: Any) -> None:
    OUT.mkdir(parents=True, exist_ok=True)
    make_user("rita", "reviewer")
    for agent, text in [
        ("refunds", "Please refund order ORD-1002, it arrived broken"),
        ("outreach", "Email grace@example.com about the Q3 roadmap review"),
        ("refunds", "Refund orders ORD-1001 and ORD-1003 please"),
    ]:
        start(agent, text)
    wait_for(lambda: ApprovalRequest.objects.count() == 4, timeout=30, message="four pending requests")

    log_in(page, live_server_url, "rita")
    expect(page.locator(".inbox-row")).to_have_count(4)
    page.screenshot(path=OUT / "inbox.png", full_page=True)

    first = ApprovalRequest.objects.filter(args__order_id="ORD-1002").first()
    assert first is not None
    page.goto(f"{live_server_url}/approvals/{first.pk}/")
    page.get_by_text("Edit the arguments, then approve").click()
    page.screenshot(path=OUT / "decision.png", full_page=True)

    page.fill("input[name='args.amount_cents']", "6500")
    page.get_by_role("button", name="Approve with these arguments").click()
    expect(page.locator(".conversation")).to_contain_text("Refund of $65.00 issued", timeout=15_000)
    page.screenshot(path=OUT / "decided.png", full_page=True)


def test_take_time_travel_screenshots(page: Page, live_server_url: str, celery_worker: Any) -> None:
    from agents.actions import do_fork
    from approvals.actions.decisions import check_decision, do_decide
    from checkpoints.models import Checkpoint, Thread

    OUT.mkdir(parents=True, exist_ok=True)
    rita, _ = make_user("rita", "reviewer"), make_user("olga", "operator")
    text = "Please refund order ORD-1002, it arrived broken"
    thread_id = off_loop(
        lambda: (
            do_start_thread(
                agent=check_start_thread(agent="refunds", text=text, thread_id=None),
                text=text,
                thread_id=None,
                actor="user:olga",
            ).id
        )
    )
    request_ = wait_for(
        lambda: ApprovalRequest.objects.filter(thread_id=thread_id).first(), timeout=20, message="the gate"
    )
    assert request_ is not None
    off_loop(
        lambda: do_decide(
            request_.pk, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve")
        )
    )
    wait_for(lambda: Thread.objects.get(pk=thread_id).status == "done", timeout=20, message="the first run")
    first = Checkpoint.objects.get(thread_id=thread_id, step=0)
    first_values = get_backend().get(thread_id=thread_id, checkpoint_id=str(first.pk)).values
    values = {
        "messages": [
            {**first_values["messages"][0], "content": "Please refund order ORD-1003, it arrived broken"}
        ]
    }
    off_loop(lambda: do_fork(thread_id, checkpoint_id=str(first.pk), values=values, actor="user:olga"))
    wait_for(
        lambda: Thread.objects.get(pk=thread_id).status == "waiting", timeout=20, message="the fork's gate"
    )

    log_in(page, live_server_url, "olga")
    page.goto(f"{live_server_url}/threads/{thread_id}/")
    page.screenshot(path=OUT / "thread-forked.png", full_page=True)
    old_head = Checkpoint.objects.filter(thread_id=thread_id, source="step").order_by("-step").first()
    assert old_head is not None
    page.goto(f"{live_server_url}/threads/{thread_id}/diff/?from={old_head.pk}")
    page.screenshot(path=OUT / "diff.png", full_page=True)


def test_take_inbox_queue_screenshots(
    page: Page, live_server_url: str, celery_worker: Any, monkeypatch: pytest.MonkeyPatch
) -> None:
    """The inbox with its queues and counts, a claimed item, an escalation; then the ledger."""
    from agents.tools import Expiry
    from approvals.actions.claims import do_claim
    from approvals.actions.expiry import do_expire_due
    from approvals.tests.helpers import gate_with_expiry

    OUT.mkdir(parents=True, exist_ok=True)
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    make_user("ada", "admin")
    for agent, text in [
        ("refunds", "Please refund order ORD-1002, it arrived broken"),
        ("outreach", "Email grace@example.com about the Q3 roadmap review"),
        ("refunds", "Refund orders ORD-1001 and ORD-1003 please"),
    ]:
        start(agent, text)
    wait_for(lambda: ApprovalRequest.objects.count() == 4, timeout=30, message="four pending requests")
    off_loop(lambda: gate_with_expiry(monkeypatch, Expiry(4 * 3600, "reject")))
    off_loop(lambda: gate_with_expiry(monkeypatch, Expiry(0.1, "escalate", to_queue="supervisors")))
    wait_for(lambda: off_loop(do_expire_due), timeout=5, message="the escalation")
    first, second = ApprovalRequest.objects.filter(agent="refunds").order_by("id")[:2]
    off_loop(lambda: do_claim(first.pk, user=sam))
    off_loop(lambda: do_claim(second.pk, user=rita))

    log_in(page, live_server_url, "rita")
    expect(page.locator(".inbox-row")).to_have_count(6)
    expect(page.locator(".inbox-row.is-claimed")).to_have_count(2)
    expect(page.locator("#live-status")).to_have_text("live")
    page.screenshot(path=OUT / "inbox-queues.png", full_page=True)

    page.goto(f"{live_server_url}/approvals/{first.pk}/")
    expect(page.locator(".request-status")).to_contain_text("claimed by sam")
    page.screenshot(path=OUT / "decision-claimed.png", full_page=True)

    page.context.clear_cookies()
    log_in(page, live_server_url, "ada")
    page.goto(f"{live_server_url}/ledger/?verify=1")
    page.screenshot(path=OUT / "ledger.png", full_page=True)
