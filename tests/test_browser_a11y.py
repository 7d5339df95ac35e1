"""Accessibility in a real browser: axe-core finds no violations on the reviewer's, operator's and
admin's pages at 1400 and 400 px, and what axe cannot see (keyboard, live regions, dialogs)."""

import json
import os
import re
from datetime import timedelta
from importlib import resources
from typing import Any

import pytest
from django.utils import timezone
from playwright.sync_api import Browser, Page, expect

from agents.actions import do_fork
from approvals.actions.claims import do_claim_op
from approvals.actions.expiry import do_expire_due
from approvals.actions.policies import do_create_policy
from approvals.actions.threads import do_control
from approvals.models import ApprovalRequest
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user
from tests.test_browser_record import undo_server  # noqa: F401  (a fixture: a server with an undo window)

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

# axe-core as axe-playwright-python bundles it; evaluated, not injected as a <script>, so the
# pages' Content-Security-Policy stays as strict as a reviewer's browser sees it.
AXE = (resources.files("axe_playwright_python") / "axe.min.js").read_text()


def axe_violations(page: Page) -> list[dict[str, Any]]:
    """axe's violations on the page as it is now: rule, impact, how many nodes, which."""
    page.evaluate(AXE)
    found = page.evaluate("axe.run(document, {resultTypes: ['violations']}).then(r => r.violations)")
    return [
        {
            "rule": v["id"],
            "impact": v["impact"],
            "n": len(v["nodes"]),
            "at": [n["target"] for n in v["nodes"][:3]],
        }
        for v in found
    ]


def audit_pages() -> list[tuple[str, str]]:
    """Build every state worth a look; return (name, path) pairs."""
    from approvals.tests.test_two_person import require

    ada = make_user("ada", "admin")
    olga = make_user("olga", "operator")
    refund = off_loop(lambda: make_gate(user_input="Please refund order ORD-1001, it arrived broken"))
    claimed = off_loop(lambda: make_gate(args={"order_id": "ORD-1002", "amount_cents": 999}))
    off_loop(do_claim_op, claimed, user=ada, op="claim")
    expired = off_loop(lambda: make_gate(args={"order_id": "ORD-1003", "amount_cents": 100}))
    ApprovalRequest.objects.filter(pk=expired.pk).update(
        expires_at=timezone.now() - timedelta(seconds=1), expiry_action="reject", expiry_reason="too slow"
    )
    off_loop(do_expire_due)
    off_loop(require, 2)
    two = off_loop(lambda: make_gate(args={"order_id": "ORD-1004", "amount_cents": 150000}))
    fields = {"name": "refunds to supervisors", "tool": "issue_refund", "when": "true", "action": "route"}
    policy = off_loop(lambda: do_create_policy(actor=None, fields={**fields, "queue": "supervisors"}))
    paused = off_loop(lambda: make_gate(args={"order_id": "ORD-1005", "amount_cents": 500}))
    off_loop(lambda: do_control(paused.thread_id, user=olga, verb="pause"))
    thread = refund.thread_id
    first = Checkpoint.objects.filter(thread_id=thread).order_by("step").first()
    assert first is not None
    forked = off_loop(lambda: make_gate(args={"order_id": "ORD-1006", "amount_cents": 700}))
    root = Checkpoint.objects.get(thread_id=forked.thread_id, step=0)
    values = get_backend().get(thread_id=forked.thread_id, checkpoint_id=str(root.pk)).values
    values["messages"][0]["content"] = "Please refund order ORD-1007"
    off_loop(lambda: do_fork(forked.thread_id, checkpoint_id=str(root.pk), values=values, actor="user:olga"))
    return [
        ("inbox", "/"),
        ("inbox filtered", "/?agent=refunds&age=0"),
        ("decision pending", f"/approvals/{refund.pk}/"),
        ("decision claimed", f"/approvals/{claimed.pk}/"),
        ("decision expired", f"/approvals/{expired.pk}/"),
        ("decision two-person", f"/approvals/{two.pk}/"),
        ("threads", "/threads/"),
        ("thread waiting", f"/threads/{thread}/"),
        ("thread paused", f"/threads/{paused.thread_id}/"),
        ("thread forked", f"/threads/{forked.thread_id}/"),
        ("checkpoint", f"/threads/{thread}/checkpoints/{first.pk}/"),
        ("diff", f"/threads/{thread}/diff/?from={first.pk}"),
        ("state editor", f"/threads/{thread}/state/"),
        ("ledger", "/ledger/?verify=1"),
        ("policy preview", f"/policies/preview/?policy={policy.pk}"),
        ("policy list", "/admin/approvals/policy/"),
        ("404", "/no-such-page/"),
    ]


def audit(
    browser: Browser, base_url: str, undo_url: str, pages: list[tuple[str, str]], width: int
) -> dict[str, Any]:
    """axe's violations on each page, and on the states reached by hand, at this width."""
    found = {}
    context = browser.new_context(viewport={"width": width, "height": 860})
    page = context.new_page()
    page.goto(f"{base_url}/login/")
    found["login"] = axe_violations(page)
    log_in(page, base_url, "ada")
    for name, path in pages:
        page.goto(base_url + path)
        page.wait_for_load_state("networkidle")
        found[name] = axe_violations(page)
    decision = dict(pages)["decision pending"]
    page.goto(base_url + decision)
    page.get_by_text("Edit the arguments, then approve").click()
    page.get_by_text("Reject, with a reason for the agent").click()
    found["decision, its forms open"] = axe_violations(page)
    page.goto(base_url + "/")
    page.keyboard.press("j")
    page.keyboard.press("a")  # a refund is consequential: the confirmation opens
    expect(page.locator("dialog.confirm-approve")).to_be_visible()
    found["inbox, a row selected, confirming"] = axe_violations(page)
    page.keyboard.press("Escape")
    context.close()
    context = browser.new_context(viewport={"width": width, "height": 860})
    page = context.new_page()
    log_in(page, base_url, "rita")
    assert page.goto(base_url + "/ledger/").status == 403  # type: ignore[union-attr]
    found["403"] = axe_violations(page)
    context.close()
    context = browser.new_context(viewport={"width": width, "height": 860})
    page = context.new_page()
    log_in(page, undo_url, "ada")
    undo = off_loop(lambda: make_gate(args={"order_id": "ORD-1009", "amount_cents": 300}))
    page.goto(f"{undo_url}/approvals/{undo.pk}/")
    page.get_by_role("button", name="Approve", exact=True).click()
    expect(page.locator("form.undo")).to_be_visible()
    found["decision in its undo window"] = axe_violations(page)
    context.close()
    return found


def test_every_page_has_no_axe_violations_at_1400_and_400_px(
    browser: Browser,
    live_server_url: str,
    undo_server: str,  # noqa: F811  (the fixture imported above)
) -> None:
    pages = audit_pages()
    make_user("rita", "reviewer")
    report = {
        f"{name} @{width}": v
        for width in (1400, 400)
        for name, v in audit(browser, live_server_url, undo_server, pages, width).items()
    }
    if os.environ.get("A11Y_OUT"):
        with open(os.environ["A11Y_OUT"], "w") as out:
            json.dump(report, out, indent=1)
    assert {name: v for name, v in report.items() if v} == {}


# The focused element, to say where the focus went when an assertion fails.
ACTIVE = "() => document.activeElement.outerHTML.slice(0, 120)"


def open_live(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.locator("#live-status")).to_have_text("live")
    page.wait_for_timeout(500)  # the socket's catch-up, if any, has landed


NAME = (
    "() => (document.activeElement.getAttribute('aria-label') || document.activeElement.textContent).trim()"
)


def tab_to(page: Page, name: str) -> None:
    """Press Tab until the focused element's accessible text is `name`."""
    for _ in range(60):
        page.keyboard.press("Tab")
        if page.evaluate(NAME) == name:
            return
    raise AssertionError(f"Tab never reached {name!r}")


def test_approving_from_the_keyboard_leaves_focus_on_the_outcome_not_the_page_top(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/approvals/{request_.pk}/")
    tab_to(page, "Approve")
    page.keyboard.press("Enter")
    expect(page.locator(".closed")).to_contain_text("You approved this request.")
    expect(page.locator(".closed")).to_be_focused()


def test_claiming_from_the_inbox_by_keyboard_keeps_focus_on_the_rows_button(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/")
    tab_to(page, "Claim")
    page.keyboard.press("Enter")
    expect(page.locator(".inbox-row .claim-mine")).to_have_text("claimed by you")
    expect(page.locator(".inbox-row").get_by_role("button", name="Release")).to_be_focused()


def test_a_decision_by_someone_else_is_announced_politely_and_the_lost_focus_lands_on_it(
    page: Page, live_server_url: str
) -> None:
    from approvals.tests.test_two_person import decide

    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    page.get_by_text("Reject, with a reason for the agent").click()
    page.get_by_role("textbox", name="Reason").focus()
    off_loop(decide, request_, sam, decision="reject", message="not now")
    expect(page.locator(".closed")).to_contain_text("Already rejected by sam")
    region = page.locator("[data-announce]")
    expect(region).to_have_attribute("aria-live", "polite")
    expect(region).to_contain_text("Already rejected by sam")
    expect(page.locator(".closed")).to_be_focused()  # the field went with the old panel: not to <body>


def test_a_new_inbox_row_is_announced_politely_and_focus_stays_put(page: Page, live_server_url: str) -> None:
    make_user("rita", "reviewer")
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/")
    page.locator("select[name=agent]").focus()
    off_loop(make_gate)
    expect(page.locator("#inbox-list .inbox-row")).to_have_count(1, timeout=15_000)
    region = page.locator("[data-announce]")
    expect(region).to_have_attribute("aria-live", "polite")
    expect(region).to_contain_text("New request: Refund $42.50")
    assert page.evaluate("document.activeElement.name") == "agent"


def test_shortcuts_do_not_fire_while_typing_a_reason(page: Page, live_server_url: str) -> None:
    make_user("rita", "reviewer")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/approvals/{request_.pk}/")
    page.keyboard.press("r")  # opens the reject choice, its reason focused
    reason = page.get_by_role("textbox", name="Reason")
    expect(reason).to_be_focused()
    page.keyboard.type("a careful reason, see order")
    expect(reason).to_have_value("a careful reason, see order")
    request_.refresh_from_db()
    assert request_.status == "pending"


def test_the_confirm_dialog_traps_focus_and_escape_returns_to_the_selected_row(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/")
    page.keyboard.press("j")
    expect(page.locator(".inbox-row[aria-current=true] .row-link")).to_be_focused()  # read out, ringed
    page.keyboard.press("a")
    dialog = page.locator("dialog.confirm-approve")
    expect(dialog).to_be_visible()
    expect(dialog).to_have_accessible_description(re.compile(r"^Approve Refund \$42\.50 to Ada Lovelace"))
    expect(dialog.get_by_role("button", name="Approve")).to_be_focused()
    for _ in range(4):
        page.keyboard.press("Tab")
        assert page.evaluate("document.activeElement.closest('dialog') !== null"), page.evaluate(ACTIVE)
    page.keyboard.press("Shift+Tab")
    assert page.evaluate("document.activeElement.closest('dialog') !== null"), page.evaluate(ACTIVE)
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    expect(page.locator(".inbox-row[aria-current=true] .row-link")).to_be_focused()


def test_arrowing_through_a_filter_waits_for_the_reviewer_to_leave_it(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    log_in(page, live_server_url, "rita")
    page.evaluate("window.__sameDocument = true")
    age = page.locator("select[name=age]")
    age.focus()
    page.keyboard.press("ArrowDown")  # passing over "older than 1 minute" on the way to another
    page.keyboard.press("ArrowDown")
    assert page.evaluate("window.__sameDocument") is True  # not applied (and the page reloaded) yet
    expect(age).to_be_focused()
    page.keyboard.press("Enter")
    page.wait_for_url(re.compile(r"age=\d+"))
    expect(page.locator("select[name=age]")).not_to_have_value("")
