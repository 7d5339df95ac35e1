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

    # args may be encrypted (a text column): match in Python.
    first = next((r for r in ApprovalRequest.objects.all() if r.args.get("order_id") == "ORD-1002"), None)
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
            )[0].id
        )
    )
    request_ = wait_for(
        lambda: ApprovalRequest.objects.filter(thread_id=thread_id).first(), timeout=20, message="the gate"
    )
    assert request_ is not None
    off_loop(
        lambda: do_decide(
            request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve")
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


def test_take_reading_screenshots(page: Page, live_server_url: str, celery_worker: Any) -> None:
    """The thread list, an email as an email, a 404 in the layout, and two pages at 400 px."""
    OUT.mkdir(parents=True, exist_ok=True)
    make_user("ada", "admin")
    for agent, text in [
        ("refunds", "Please refund order ORD-1002, it arrived broken"),
        ("outreach", "Email grace@example.com about the Q3 roadmap review"),
        ("refunds", "Refund orders ORD-1001 and ORD-1003 please"),
    ]:
        start(agent, text)
    wait_for(lambda: ApprovalRequest.objects.count() == 4, timeout=30, message="four pending requests")

    log_in(page, live_server_url, "ada")
    page.goto(f"{live_server_url}/threads/")
    page.screenshot(path=OUT / "threads.png", full_page=True)
    email = ApprovalRequest.objects.get(action="send_email")
    page.goto(f"{live_server_url}/approvals/{email.pk}/")
    page.screenshot(path=OUT / "decision-email.png", full_page=True)
    page.goto(f"{live_server_url}/threads/no-such-thread/")
    page.screenshot(path=OUT / "not-found.png", full_page=True)

    page.set_viewport_size({"width": 400, "height": 860})
    page.goto(f"{live_server_url}/")
    page.screenshot(path=OUT / "inbox-narrow.png", full_page=True)
    page.goto(f"{live_server_url}/threads/")
    page.screenshot(path=OUT / "threads-narrow.png", full_page=True)


def shoot(page: Page, name: str) -> None:
    """The page at 1400 px for the README; also at 400 px when SCREENSHOTS_NARROW names a folder."""
    import os

    page.set_viewport_size({"width": 1400, "height": 900})
    page.screenshot(path=OUT / f"{name}.png", full_page=True)
    narrow = os.environ.get("SCREENSHOTS_NARROW", "")
    if narrow:
        page.set_viewport_size({"width": 400, "height": 900})
        page.screenshot(path=Path(narrow) / f"{name}-400.png", full_page=True)
        page.set_viewport_size({"width": 1400, "height": 900})


def test_take_record_screenshots(page: Page, live_server_url: str, celery_worker: Any) -> None:
    """Effects already done (inbox flag, decision page, fork dialog) and a superseded request's record."""
    import json

    from approvals.actions.threads import do_edit_state
    from checkpoints.models import Checkpoint
    from tests.factories import make_gate
    from tests.live import approve_pending, reach, start_thread

    OUT.mkdir(parents=True, exist_ok=True)
    olga, _ = make_user("olga", "operator"), make_user("ada", "admin")
    thread_id = start_thread("Please refund order ORD-1004, it never arrived")
    reach(thread_id, "waiting", timeout=30)
    off_loop(approve_pending, thread_id, "rita")
    reach(thread_id, "done", timeout=30)
    again = off_loop(lambda: make_gate(args={"order_id": "ORD-1004", "amount_cents": 58000}))
    edited = off_loop(lambda: make_gate(args={"order_id": "ORD-1001", "amount_cents": 4250}))

    def edit() -> None:
        values = get_backend().get(thread_id=edited.thread_id).values
        call = values["messages"][-1]["tool_calls"][0]["function"]
        call["arguments"] = json.dumps({"order_id": "ORD-1002", "amount_cents": 4250})
        do_edit_state(edited.thread_id, user=olga, values=values)

    off_loop(edit)
    log_in(page, live_server_url, "ada")
    expect(page.locator("[data-done-before]")).to_be_visible()
    shoot(page, "inbox-done-before")
    page.goto(f"{live_server_url}/approvals/{again.pk}/")
    expect(page.locator("[data-effects]")).to_be_visible()
    shoot(page, "decision-effects")
    page.goto(f"{live_server_url}/approvals/{edited.pk}/")
    shoot(page, "decision-superseded")

    first = Checkpoint.objects.get(thread_id=thread_id, step=0)
    page.goto(f"{live_server_url}/threads/{thread_id}/checkpoints/{first.pk}/")
    editor = page.locator("textarea[name=values]")
    editor.fill(editor.input_value().replace("ORD-1004", "ORD-1003"))
    page.get_by_role("button", name="Review the fork…").click()
    expect(page.locator("[data-fork-preview]")).to_be_visible()
    page.locator("#fork").scroll_into_view_if_needed()
    shoot(page, "fork-preview")


def test_take_policy_screenshots(page: Page, live_server_url: str, celery_worker: Any) -> None:
    """The policy admin, a policy's preview before saving, and a two-person decision page."""
    from approvals.actions.decisions import check_decision, do_decide
    from approvals.actions.policies import do_create_policy
    from approvals.models import Policy
    from tests.factories import make_gate

    OUT.mkdir(parents=True, exist_ok=True)
    ada, rita = make_user("ada", "admin"), make_user("rita", "reviewer")
    make_user("bob", "reviewer")
    ada.is_staff = True
    ada.save()
    # Earlier traffic, decided by people before any policy existed.
    for order, cents in [("ORD-1001", 4250), ("ORD-1003", 7900), ("ORD-1004", 1200), ("ORD-1005", 62000)]:
        off_loop(make_gate, args={"order_id": order, "amount_cents": cents})
    for request_ in ApprovalRequest.objects.all()[:2]:
        valid = check_decision(request_, user=rita, decision="approve")
        off_loop(do_decide, request_, reviewer=rita, valid=valid)
    policies: list[tuple[str, str, str, dict[str, Any]]] = [
        ("two people", "args.amount_cents > 100000", "require", {"approvers": 2, "order": 10}),
        ("large refunds", "args.amount_cents > 50000", "route", {"queue": "supervisors", "order": 20}),
        ("small refunds", "args.amount_cents < 5000", "approve", {"message": "Under $50.", "order": 30}),
    ]
    for name, when, action, extra in policies:
        fields = {"name": name, "tool": "issue_refund", "when": when, "action": action, **extra}
        off_loop(do_create_policy, actor=ada, fields=fields)

    big = off_loop(make_gate, args={"order_id": "ORD-1006", "amount_cents": 150000})
    off_loop(do_decide, big, reviewer=rita, valid=check_decision(big, user=rita, decision="approve"))
    log_in(page, live_server_url, "bob")
    page.goto(f"{live_server_url}/approvals/{big.pk}/")
    expect(page.locator("[data-policy-note]")).to_contain_text("1 of 2 approvals: rita")
    shoot(page, "policy-two-person")

    pending = next(
        r for r in ApprovalRequest.objects.filter(status="pending") if r.args["amount_cents"] == 1200
    )
    page.goto(f"{live_server_url}/approvals/{pending.pk}/")
    page.get_by_text("Approve, and keep approving on this thread").click()
    shoot(page, "standing-decision")
    page.locator("[data-standing-submit]").click()
    expect(page.locator(".closed")).to_contain_text("You approved this request.")
    page.goto(f"{live_server_url}/threads/{pending.thread_id}/")
    shoot(page, "standing-thread")

    page.context.clear_cookies()
    log_in(page, live_server_url, "ada")
    page.goto(f"{live_server_url}/admin/approvals/policy/")
    shoot(page, "policy-admin-list")
    small = Policy.objects.get(name="small refunds")
    page.goto(f"{live_server_url}/admin/approvals/policy/{small.pk}/change/")
    page.fill("textarea[name=when]", "args.amount_cents < 10000")
    shoot(page, "policy-admin")
    with page.context.expect_page() as opened:
        page.locator("[data-policy-preview]").click()
    preview = opened.value
    expect(preview.locator("[data-preview-summary]")).to_be_visible()
    shoot(preview, "policy-preview")
