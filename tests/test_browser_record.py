"""Pages that stay true (issue 14), in a real browser: the inbox's keys act on the selected row;
a consequential approval from the keyboard asks first and can be undone inside its window; the
fork dialog forks with the edited state after a preview; a decision page is the record of what
was asked; effects already done are shown where decisions are made."""

import json
from collections.abc import Iterator
from typing import Any

import pytest
from django.contrib.auth.models import User
from playwright.sync_api import Page, expect

from agents.examples.models import Refund
from approvals.actions.threads import do_edit_state
from approvals.models import ApprovalRequest, AuditEvent
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint, PendingWrite
from tests.browser import browser_fixture, log_in, off_loop, page_fixture  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user
from tests.live import LiveServices, approve_pending, free_port, reach, start_thread, thread_status, wait_for

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

UNDO_S = 4


def gate(**kwargs: Any) -> ApprovalRequest:
    return off_loop(lambda: make_gate(**kwargs))


def refund_args(order: str, cents: int) -> dict[str, Any]:
    return {"order_id": order, "amount_cents": cents}


def test_inbox_keys_act_on_the_selected_row_and_a_consequential_approval_asks_first(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    first = gate(args=refund_args("ORD-1001", 4250))
    second = gate(args=refund_args("ORD-1002", 12999))
    log_in(page, live_server_url, "rita")
    expect(page.locator("#inbox-list .inbox-row")).to_have_count(2)

    page.keyboard.press("j")
    page.keyboard.press("a")
    dialog = page.locator("dialog.confirm-approve")
    expect(dialog).to_contain_text("consequential")
    page.keyboard.press("Escape")
    expect(dialog).to_have_count(0)
    assert ApprovalRequest.objects.get(pk=first.pk).status == "pending"  # cancelled: nothing decided

    page.keyboard.press("a")
    page.keyboard.press("Enter")  # the dialog's Approve has the focus
    expect(page.locator("#inbox-notice")).to_contain_text("Approved Refund $42.50")
    wait_for(lambda: ApprovalRequest.objects.get(pk=first.pk).status == "approved", message="the approval")
    expect(page.locator(f"#approval-{first.pk}")).to_have_count(0)

    page.keyboard.press("j")
    page.keyboard.press("e")
    page.wait_for_url(f"**/approvals/{second.pk}/#edit")
    expect(page.locator('details[data-key="e"]')).to_have_attribute("open", "")
    page.goto(f"{live_server_url}/")
    expect(page.locator("#inbox-list .inbox-row")).to_have_count(1)
    page.keyboard.press("j")
    page.keyboard.press("r")
    page.wait_for_url(f"**/approvals/{second.pk}/#reject")
    expect(page.locator('details[data-key="r"]')).to_have_attribute("open", "")
    assert ApprovalRequest.objects.get(pk=second.pk).status == "pending"


@pytest.fixture
def undo_server(live_services: LiveServices) -> Iterator[str]:
    """A second web server whose decisions wait DECISION_UNDO_S before taking effect."""
    port = free_port()
    process = live_services.start_web(port, extra_env={"DECISION_UNDO_S": str(UNDO_S)}, name="web-undo")
    yield f"http://127.0.0.1:{port}"
    live_services.stop(process)


def test_a_decision_can_be_undone_inside_its_window_and_takes_effect_only_after_it(
    page: Page, undo_server: str, celery_worker: Any
) -> None:
    make_user("rita", "reviewer")
    request_ = gate(args=refund_args("ORD-1003", 1999))
    log_in(page, undo_server, "rita")
    page.goto(f"{undo_server}/approvals/{request_.pk}/")

    page.keyboard.press("a")
    page.get_by_role("button", name="Approve", exact=True).last.click()  # in the dialog
    expect(page.locator(".closed")).to_contain_text("You approved this request.")
    page.get_by_role("button", name="Undo").click()

    expect(page.locator(".alert.success", has_text="Decision undone")).to_be_visible()
    assert ApprovalRequest.objects.get(pk=request_.pk).status == "pending"
    assert AuditEvent.objects.filter(action="decision.undo", approval_ref=request_.pk).exists()
    assert not PendingWrite.objects.filter(checkpoint_id=request_.checkpoint_id, kind="decision").exists()

    page.get_by_role("button", name="Approve", exact=True).click()  # by mouse: no confirmation
    expect(page.locator("form.undo")).to_be_visible()
    assert thread_status(request_.thread_id) == "waiting"  # not before the window has passed
    expect(page.locator(".closed")).to_contain_text("It has taken effect.", timeout=(UNDO_S + 2) * 1000)
    reach(request_.thread_id, "done", timeout=30)
    assert list(Refund.objects.values_list("order_id", flat=True)) == ["ORD-1003"]


def test_effects_already_done_are_shown_on_the_decision_page_in_the_inbox_and_in_the_fork_dialog(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("ada", "admin")
    thread_id = start_thread("Please refund order ORD-1003")
    reach(thread_id, "waiting", timeout=30)
    off_loop(approve_pending, thread_id)
    reach(thread_id, "done", timeout=30)
    again = gate(args=refund_args("ORD-1003", 1999))  # the same refund, asked in another thread
    log_in(page, live_server_url, "ada")

    row = page.locator(f"#approval-{again.pk}")
    expect(row.locator("[data-done-before]")).to_contain_text("already done")
    page.goto(f"{live_server_url}/approvals/{again.pk}/")
    effects = page.locator("[data-effects]")
    expect(effects).to_contain_text("Already done in other threads")
    expect(effects).to_contain_text("$19.99")
    expect(effects).to_contain_text(thread_id)

    # The fork dialog: what already happened, what may run again, the edits as a diff, then fork.
    first = Checkpoint.objects.get(thread_id=thread_id, step=0)
    page.goto(f"{live_server_url}/threads/{thread_id}/checkpoints/{first.pk}/")
    expect(page.locator("#fork [data-effects]")).to_contain_text("Already done on this thread")
    expect(page.locator("#fork [data-run-again]")).to_contain_text("issue_refund")
    expect(page.locator("#fork [data-run-again]")).to_contain_text("Refund $19.99")  # in the tool's words
    editor = page.locator("textarea[name=values]")
    editor.fill(editor.input_value().replace("ORD-1003", "ORD-1004"))
    page.get_by_role("button", name="Review the fork…").click()
    preview = page.locator("[data-fork-preview]")
    expect(preview.locator("tr.diff-changed")).to_contain_text("ORD-1004")
    preview.get_by_role("button", name="Fork from step 0 with these edits").click()

    expect(page.locator(".alert.success")).to_contain_text("Forked with your edits")
    wait_for(
        lambda: ApprovalRequest.objects.filter(thread_id=thread_id, status="pending").exists(),
        timeout=30,
        message="the fork's gate",
    )
    fork_gate = ApprovalRequest.objects.get(thread_id=thread_id, status="pending")
    assert fork_gate.args["order_id"] == "ORD-1004"
    # On the new branch, the refund done on the branch it left is still listed ("on any branch").
    page.goto(f"{live_server_url}/threads/{thread_id}/checkpoints/{fork_gate.checkpoint_id}/")
    expect(page.locator("#fork [data-effects]")).to_contain_text("$19.99")


def edit_call(request_: ApprovalRequest, *, user: User, order: str) -> None:
    """An operator changes the proposed call's order in the waiting thread's state."""
    values = get_backend().get(thread_id=request_.thread_id).values
    call = values["messages"][-1]["tool_calls"][0]["function"]
    call["arguments"] = json.dumps({**json.loads(call["arguments"]), "order_id": order})
    do_edit_state(request_.thread_id, user=user, values=values)


def test_a_superseded_request_shows_what_was_asked_and_links_to_the_request_that_asks_again(
    page: Page, live_server_url: str
) -> None:
    olga = make_user("olga", "operator")
    make_user("rita", "reviewer")
    asked = gate(args=refund_args("ORD-1001", 4250))
    later = gate(args=refund_args("ORD-1002", 12999))
    off_loop(edit_call, asked, user=olga, order="ORD-1004")
    again = ApprovalRequest.objects.get(thread_id=asked.thread_id, status="pending")
    log_in(page, live_server_url, "rita")

    # The re-asked request keeps the original's place: before the one asked after it.
    rows = page.locator("#inbox-list .inbox-row")
    expect(rows).to_have_count(2)
    expect(rows.first).to_have_attribute("id", f"approval-{again.pk}")
    expect(rows.last).to_have_attribute("id", f"approval-{later.pk}")

    page.goto(f"{live_server_url}/approvals/{asked.pk}/")
    expect(page.locator(".closed")).to_contain_text("the state was edited by olga")
    record = page.locator(".asked-conversation")
    expect(record).to_contain_text("ORD-1001")
    expect(record).not_to_contain_text("ORD-1004")
    page.locator(".closed .replaced").get_by_role("link").click()

    page.wait_for_url(f"**/approvals/{again.pk}/")
    expect(page.locator("pre.args").first).to_contain_text("ORD-1004")
    expect(page.locator(".reasked")).to_contain_text(f"request #{asked.pk}")
