"""An admin previews an unsaved policy from its admin form in a real browser: the new tab lists
the requests it would decide differently, each call's arguments as fields one per line (not JSON
text), a request nobody decided yet as still pending, and fits a 400 px phone."""

import os
from pathlib import Path

import pytest
from playwright.sync_api import Browser, Page, expect

from approvals.actions.decisions import check_decision, do_decide
from approvals.models import ApprovalRequest
from tests.browser import browser_fixture, csp_violations, log_in, off_loop  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]
SHOTS = os.environ.get("GATEHOUSE_SHOTS_DIR", "")  # set to look at the page as the user would


def refund(cents: int, order: str) -> ApprovalRequest:
    return off_loop(lambda: make_gate(args={"order_id": order, "amount_cents": cents}))


def approve(request_: ApprovalRequest, *, by: str) -> None:
    reviewer = make_user(by, "reviewer")
    valid = check_decision(request_, user=reviewer, decision="approve", args=None, message="")
    off_loop(lambda: do_decide(request_, reviewer=reviewer, valid=valid))


def preview_from_the_admin_form(page: Page, base_url: str) -> Page:
    page.goto(f"{base_url}/admin/approvals/policy/add/")
    page.fill("input[name=name]", "small refunds")
    page.fill("input[name=tool]", "issue_refund")
    page.fill("textarea[name=when]", "args.amount_cents < 5000")
    page.select_option("select[name=action]", "approve")
    with page.context.expect_page() as opened:
        page.locator("[data-policy-preview]").click()
    preview = opened.value
    preview.wait_for_load_state()
    return preview


@pytest.mark.parametrize("width", [1400, 400])
def test_the_preview_shows_each_requests_arguments_as_fields_and_fits_the_screen(
    browser: Browser, live_server_url: str, width: int
) -> None:
    make_user("ada", "admin")
    waiting, decided = refund(4250, "ORD-1001"), refund(1999, "ORD-1003")
    refund(90000, "ORD-1002")  # over the limit: the policy leaves it to a person, as it was
    approve(decided, by="rita")
    context = browser.new_context(viewport={"width": width, "height": 900})
    violations = csp_violations(context)
    try:
        page = context.new_page()
        log_in(page, live_server_url, "ada")
        preview = preview_from_the_admin_form(page, live_server_url)

        row = preview.locator(f'tr[data-request="{waiting.pk}"]')
        fields = row.locator("dl.args-preview > div")
        expect(fields).to_have_count(2)
        shown = sorted(
            f.locator("dt").inner_text() + " = " + f.locator("dd").inner_text() for f in fields.all()
        )
        assert shown == ["Amount cents = 4250", "Order id = ORD-1001"]
        expect(row.locator('td[data-label="Ended"]')).to_have_text("still pending")
        done = preview.locator(f'tr[data-request="{decided.pk}"] td[data-label="Ended"]')
        expect(done).to_have_text("approved by rita")
        expect(preview.locator("[data-policy-preview]")).not_to_contain_text('"order_id"')
        expect(preview.locator("[data-policy-preview]")).not_to_contain_text("another policy")
        assert not preview.evaluate("document.documentElement.scrollWidth > window.innerWidth")
        if SHOTS:
            preview.screenshot(path=Path(SHOTS) / f"policy-preview-{width}.png", full_page=True)
    finally:
        context.close()
    assert violations == [], "the page broke its Content-Security-Policy"
