"""Where the keyboard lands: the inbox's selection after an approval, and the first invalid field
after a decision form comes back with errors."""

import re
from typing import Any

import pytest
from playwright.sync_api import APIResponse, Page, Route, expect

from approvals.models import ApprovalRequest
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def approve_selected(page: Page) -> None:
    """Press a on the selected row and confirm (a refund is consequential)."""
    page.keyboard.press("a")
    expect(page.locator("dialog.confirm-approve")).to_be_visible()
    page.keyboard.press("Enter")


def test_approving_the_selected_row_selects_the_next_one_then_the_previous_at_the_end(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("rita", "reviewer")
    first, second, third = off_loop(make_gate), off_loop(make_gate), off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    expect(page.locator("#live-status")).to_have_text("live")
    rows = page.locator("#inbox-list .inbox-row")
    expect(rows).to_have_count(3)
    page.keyboard.press("j")
    page.keyboard.press("j")
    expect(page.locator(f"#approval-{second.pk}")).to_have_attribute("aria-current", "true")

    approve_selected(page)
    expect(page.locator(f"#approval-{second.pk}")).to_have_count(0)
    expect(page.locator(f"#approval-{third.pk}")).to_have_attribute("aria-current", "true")
    expect(page.locator("#inbox-notice")).to_contain_text("Approved")

    approve_selected(page)  # the last row: the one before it is next
    expect(page.locator(f"#approval-{third.pk}")).to_have_count(0)
    expect(page.locator(f"#approval-{first.pk}")).to_have_attribute("aria-current", "true")
    expect(page.locator("[aria-current=true]")).to_have_count(1)
    assert ApprovalRequest.objects.filter(status="pending").count() == 1


def test_the_next_row_is_selected_even_before_the_live_update_removes_the_approved_one(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("rita", "reviewer")
    first, second = off_loop(make_gate), off_loop(make_gate)
    held: list[tuple[Any, str | bytes]] = []
    passing: list[bool] = []

    def hold_when_marked(ws: Any) -> None:
        server = ws.connect_to_server()
        server.on_message(lambda m: held.append((ws, m)) if held or not passing else ws.send(m))

    page.route_web_socket(re.compile(r".*/ws/inbox/.*"), hold_when_marked)
    passing.append(True)
    log_in(page, live_server_url, "rita")
    expect(page.locator("#live-status")).to_have_text("live")
    page.wait_for_timeout(300)  # the catch-up list on connect has passed
    passing.clear()  # from now on the pushes wait: the approval's answer arrives first
    page.keyboard.press("j")

    approve_selected(page)
    expect(page.locator("#inbox-notice")).to_contain_text("Approved")
    expect(page.locator(f"#approval-{first.pk}")).to_be_visible()
    expect(page.locator(f"#approval-{second.pk}")).to_have_attribute("aria-current", "true")
    for ws, message in held:
        ws.send(message)
    expect(page.locator(f"#approval-{first.pk}")).to_have_count(0)
    expect(page.locator(f"#approval-{second.pk}")).to_have_attribute("aria-current", "true")


def test_the_next_row_is_selected_when_the_live_update_removes_the_approved_one_first(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("rita", "reviewer")
    first, second = off_loop(make_gate), off_loop(make_gate)
    answers: list[tuple[Route, APIResponse]] = []
    page.route(f"**/approvals/{first.pk}/", lambda route: answers.append((route, route.fetch())))
    log_in(page, live_server_url, "rita")
    expect(page.locator("#live-status")).to_have_text("live")
    page.keyboard.press("j")

    approve_selected(page)
    expect(page.locator(f"#approval-{first.pk}")).to_have_count(0)  # the answer is still held
    while not answers:
        page.wait_for_timeout(50)
    route, answer = answers[0]
    route.fulfill(response=answer)
    expect(page.locator("#inbox-notice")).to_contain_text("Approved")
    expect(page.locator(f"#approval-{second.pk}")).to_have_attribute("aria-current", "true")


def test_a_row_decided_by_someone_else_does_not_pass_the_selection_to_its_neighbour(
    page: Page, live_server_url: str
) -> None:
    """Only the reviewer's own approval moves the selection on: an `a` meant for a row that
    vanished under the pointer must not approve one the reviewer has not read."""
    from approvals.actions.decisions import check_decision, do_decide

    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    first, second = off_loop(make_gate), off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    expect(page.locator("#live-status")).to_have_text("live")
    page.keyboard.press("j")
    expect(page.locator(f"#approval-{first.pk}")).to_have_attribute("aria-current", "true")

    off_loop(
        lambda: do_decide(
            first, reviewer=sam, valid=check_decision(first, user=sam, decision="reject", message="no")
        )
    )
    expect(page.locator(f"#approval-{first.pk}")).to_have_count(0)
    expect(page.locator(f"#approval-{second.pk}")).not_to_have_attribute("aria-current", "true")


def test_claiming_the_selected_row_with_c_keeps_it_selected(page: Page, live_server_url: str) -> None:
    make_user("rita", "reviewer")
    off_loop(make_gate)
    second = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    page.keyboard.press("j")
    page.keyboard.press("j")
    row = page.locator(f"#approval-{second.pk}")
    page.keyboard.press("c")
    expect(row).to_contain_text("claimed by you")
    expect(row).to_have_attribute("aria-current", "true")


def focused(page: Page) -> dict[str, Any]:
    """The focused element's name, aria-invalid, and the text of what describes it."""
    return page.evaluate(
        """() => {
            const el = document.activeElement;
            const ids = (el.getAttribute("aria-describedby") || "").split(" ").filter(Boolean);
            const described = ids.map((id) => document.getElementById(id)?.textContent.trim() || "");
            const invalid = el.getAttribute("aria-invalid");
            return {name: el.name, invalid: invalid, described: described.join(" | ")};
        }"""
    )


def test_a_reject_without_a_reason_focuses_the_reason_field(page: Page, live_server_url: str) -> None:
    make_user("rita", "reviewer")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/approvals/{request_.pk}/")
    page.keyboard.press("r")
    page.get_by_role("button", name="Reject", exact=True).click()

    expect(page.locator(".field-error")).to_be_visible()
    expect(page.locator("details[data-key=r] textarea[name=message]")).to_be_focused()
    now = focused(page)
    assert now["invalid"] == "true" and "Reason:" in now["described"]
    page.keyboard.type("Wrong order")  # the reviewer types the reason straight away
    page.keyboard.press("Tab")
    page.keyboard.press("Enter")
    expect(page.locator(".closed")).to_contain_text("You rejected this request.")


def test_an_edit_with_invalid_arguments_focuses_the_first_invalid_field(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/approvals/{request_.pk}/")
    page.keyboard.press("e")
    page.fill("input[name='args.amount_cents']", "0")
    page.get_by_role("button", name="Approve with these arguments").click()

    expect(page.locator("label.invalid")).to_have_count(1)
    expect(page.locator("input[name='args.amount_cents']")).to_be_focused()
    now = focused(page)
    assert now["invalid"] == "true" and "greater than 0" in now["described"]
    assert page.locator("input[name='args.order_id']").get_attribute("aria-invalid") is None


def test_a_standing_approval_with_a_past_date_focuses_the_date(page: Page, live_server_url: str) -> None:
    make_user("rita", "reviewer")
    request_ = off_loop(make_gate, args={"order_id": "ORD-1004", "amount_cents": 1200})
    log_in(page, live_server_url, "rita")
    page.goto(f"{live_server_url}/approvals/{request_.pk}/")
    page.get_by_text("Approve, and keep approving on this thread").click()
    page.fill("input[name=until]", "2020-01-01T10:00")
    page.locator("[data-standing-submit]").click()

    expect(page.locator(".field-error")).to_contain_text("must be in the future")
    expect(page.locator("input[name=until]")).to_be_focused()
    now = focused(page)
    assert now["invalid"] == "true" and "must be in the future" in now["described"]
