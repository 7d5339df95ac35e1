"""The decision page in a real browser: its panel says what the request waits for and who may
act, and its live updates show what a reload shows, touching nothing that is not on the page.
Set SHOTS_DIR to keep a screenshot of each state at 1400 and 400 px wide."""

import os
from pathlib import Path
from typing import Any

import pytest
from playwright.sync_api import Browser, Page, expect

from approvals.actions.claims import do_claim_op
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.threads import do_control
from approvals.models import ApprovalRequest
from checkpoints.models import Thread
from tests.browser import browser_fixture, log_in, off_loop, page_fixture, start_refund  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user
from tests.live import wait_for
from tests.test_live_decision_page import sibling

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def console_errors(page: Page) -> list[str]:
    errors: list[str] = []
    page.on("console", lambda m: errors.append(m.text) if m.type == "error" else None)
    return errors


def open_live(page: Page, url: str) -> None:
    page.goto(url)
    expect(page.locator("#live-status")).to_have_text("live")
    page.wait_for_timeout(500)  # the socket's catch-up, if any, has landed


def shoot(page: Page, name: str) -> None:
    if not os.environ.get("SHOTS_DIR"):
        return
    size = page.viewport_size or {"width": 1280, "height": 860}
    for width in (1400, 400):
        page.set_viewport_size({"width": width, "height": 900})
        page.screenshot(path=str(Path(os.environ["SHOTS_DIR"]) / f"{name}-{width}.png"), full_page=True)
    page.set_viewport_size(size)


def gate_of(thread_id: str) -> ApprovalRequest:
    found = wait_for(
        lambda: ApprovalRequest.objects.filter(thread_id=thread_id).first(), timeout=20, message="a gate"
    )
    assert found is not None
    return found


def decide(request_: ApprovalRequest, *, by: Any, decision: str = "reject", message: str = "") -> None:
    valid = check_decision(request_, user=by, decision=decision, message=message)
    off_loop(lambda: do_decide(request_, reviewer=by, valid=valid))


def test_a_decided_requests_panel_keeps_the_whole_record_live_and_after_a_reload(
    page: Page, live_server_url: str, celery_worker: Any
) -> None:
    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    errors = console_errors(page)
    first = gate_of(start_refund("Please refund order ORD-1001"))
    decide(first, by=sam, decision="approve")
    wait_for(lambda: Thread.objects.get(pk=first.thread_id).status == "done", timeout=20, message="it ran")
    second = gate_of(start_refund("Please refund order ORD-1001"))

    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{second.pk}/")
    expect(page.locator("[data-effects]")).to_contain_text("Already done in other threads")
    decide(second, by=sam, message=f"a repeat of request #{first.pk}")

    panel = page.locator(f"#decision-panel-{second.pk}")
    for moment in ("live", "reloaded"):
        expect(panel.locator(".closed")).to_contain_text("Already rejected by sam")
        expect(panel.locator(".why")).to_contain_text("Please refund order ORD-1001")
        expect(panel.locator("[data-effects]")).to_contain_text("Already done in other threads")
        shoot(page, f"decision-rejected-{moment}")
        open_live(page, f"{live_server_url}/approvals/{second.pk}/")
    assert errors == []


def test_a_parallel_requests_decision_reaches_the_page_without_console_errors(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    errors = console_errors(page)
    own = off_loop(make_gate)
    other = off_loop(sibling, own)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{own.pk}/")

    decide(other, by=sam, message="not this one")  # its panel and status line are not on this page
    page.wait_for_timeout(1000)
    assert errors == []
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_visible()


def test_another_reviewers_decision_refreshes_the_pages_conversation_with_its_panel(
    page: Page, live_server_url: str, settings: Any
) -> None:
    # Inside the undo window nothing resumes the thread: the decision's own push must tell the page.
    settings.DECISION_UNDO_S = 60
    make_user("rita", "reviewer")
    sam = make_user("sam", "reviewer")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    tag = page.locator("#thread-live .tool-call .tag")
    expect(tag).to_have_text("pending")

    decide(request_, by=sam, message="not now")
    expect(page.locator(".closed")).to_contain_text("Already rejected by sam")
    expect(tag).to_have_text("rejected by sam")
    shoot(page, "decision-conversation-live")


def test_after_a_first_approval_its_reviewer_sees_it_recorded_and_no_approve_button(
    page: Page, browser: Browser, live_server_url: str
) -> None:
    from approvals.tests.test_two_person import big_refund, require

    make_user("rita", "reviewer")
    make_user("sam", "reviewer")
    off_loop(require, 2)
    request_ = off_loop(big_refund)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    page.get_by_role("button", name="Approve").click()

    signed = page.locator("[data-signed-off]")
    expect(signed).to_contain_text("Your approval is recorded (1 of 2 approvals: rita)")
    expect(signed).to_contain_text("another reviewer must approve it now")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    shoot(page, "decision-two-person-signed")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    expect(page.get_by_role("button", name="Approve")).to_have_count(0)
    expect(page.get_by_text("Reject, with a reason for the agent")).to_be_visible()

    other = browser.new_context(viewport={"width": 1280, "height": 860})
    sams = other.new_page()
    log_in(sams, live_server_url, "sam")
    sams.goto(f"{live_server_url}/approvals/{request_.pk}/")
    expect(sams.get_by_role("button", name="Approve")).to_be_visible()
    expect(sams.locator("[data-signed-off]")).to_have_count(0)
    other.close()


def test_a_request_claimed_by_another_shows_who_holds_it_and_no_decide_buttons(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    ada = make_user("ada", "admin")
    request_ = off_loop(make_gate)
    off_loop(do_claim_op, request_, user=ada, op="claim")
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")

    expect(page.locator("[data-held-by]")).to_contain_text("Waiting for ada, who claimed this request")
    for name in ("Approve", "Approve with these arguments", "Reject"):
        expect(page.get_by_role("button", name=name, exact=True)).to_have_count(0)
    shoot(page, "decision-claimed-by-other")

    off_loop(do_claim_op, request_, user=ada, op="release")  # live: the buttons come back
    expect(page.get_by_role("button", name="Approve", exact=True)).to_be_visible()
    expect(page.locator("[data-held-by]")).to_have_count(0)


def test_an_admin_sees_another_reviewers_claim_and_keeps_release_and_reassign(
    page: Page, live_server_url: str
) -> None:
    rita = make_user("rita", "reviewer")
    make_user("ada", "admin")
    request_ = off_loop(make_gate)
    off_loop(do_claim_op, request_, user=rita, op="claim")
    log_in(page, live_server_url, "ada")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")

    expect(page.locator("[data-held-by]")).to_contain_text(
        "Waiting for rita, who claimed this request. You can release it or reassign it above."
    )
    expect(page.get_by_role("button", name="Approve", exact=True)).to_have_count(0)
    expect(page.get_by_role("button", name="Release")).to_be_visible()
    expect(page.get_by_role("button", name="Reassign")).to_be_visible()
    shoot(page, "decision-admin-sees-claim")


def test_a_standing_approval_says_what_it_approves_from_now_on_and_where_to_revoke_it(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    request_ = off_loop(make_gate)
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    page.get_by_text("Approve, and keep approving on this thread").click()
    page.locator("[data-standing-submit]").click()

    note = page.locator("[data-standing-note]")
    expect(note).to_contain_text("A standing approval by rita now approves every later issue_refund call")
    expect(note.get_by_role("link", name="the thread page")).to_have_attribute(
        "href", f"/threads/{request_.thread_id}/"
    )
    shoot(page, "decision-standing")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    expect(page.locator("[data-standing-note]")).to_contain_text("Revoke it under")


def test_an_approval_on_a_paused_thread_says_it_runs_when_an_operator_resumes(
    page: Page, live_server_url: str
) -> None:
    make_user("rita", "reviewer")
    olga = make_user("olga", "operator")
    request_ = off_loop(make_gate)
    off_loop(lambda: do_control(request_.thread_id, user=olga, verb="pause"))
    log_in(page, live_server_url, "rita")
    open_live(page, f"{live_server_url}/approvals/{request_.pk}/")
    page.get_by_role("button", name="Approve", exact=True).click()

    expect(page.locator(".closed")).to_contain_text("You approved this request.")
    expect(page.locator("[data-paused-note]")).to_have_text(
        "The run is paused: the approved call runs when an operator resumes the thread."
    )
    shoot(page, "decision-approved-paused")
    off_loop(lambda: do_control(request_.thread_id, user=olga, verb="resume"))  # live: the note goes
    expect(page.locator("[data-paused-note]")).to_have_count(0)
    expect(page.locator(".closed")).to_contain_text("You approved this request.")
