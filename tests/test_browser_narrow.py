"""At 400 px every main page fits the screen: no horizontal scroll (the top bar and the thread
table used to overflow)."""

import pytest
from playwright.sync_api import Browser

from approvals.actions.policies import do_create_policy
from approvals.actions.threads import do_control
from checkpoints.models import Checkpoint
from tests.browser import browser_fixture, csp_violations, log_in, off_loop  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user

# The innermost elements sticking out past the right edge: what to fix when this fails.
OFFENDERS = """() => [...document.querySelectorAll('body *')]
  .filter(e => e.getBoundingClientRect().right > window.innerWidth + 0.5)
  .filter(e => ![...e.children].some(c => c.getBoundingClientRect().right > window.innerWidth + 0.5))
  .slice(0, 6)
  .map(e => [e.tagName.toLowerCase(), ...e.classList].join('.')
    + ' ' + Math.round(e.getBoundingClientRect().right))"""

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]


def test_every_main_page_fits_400_px_without_horizontal_scroll(
    browser: Browser, live_server_url: str
) -> None:
    make_user("ada", "admin")
    email = {
        "to": "grace@example.com",
        "subject": "About the Q3 roadmap review meeting next week",
        "body": "Hi Grace,\n\n" + "A long line without breaks " * 12,
    }
    request_ = off_loop(
        lambda: make_gate(agent="outreach", action="send_email", args=email, user_input="Email Grace " * 20)
    )
    off_loop(lambda: make_gate(user_input="Please refund order ORD-1001, it arrived broken"))
    fields = {"name": "refunds to supervisors", "tool": "issue_refund", "when": "true", "action": "route"}
    policy = off_loop(lambda: do_create_policy(actor=None, fields={**fields, "queue": "supervisors"}))
    thread = request_.thread_id
    off_loop(lambda: do_control(thread, user=make_user("olga", "operator"), verb="pause"))
    first = Checkpoint.objects.filter(thread_id=thread).order_by("step").first()
    assert first is not None
    pages = [
        "/",
        f"/approvals/{request_.pk}/",
        "/threads/",
        f"/threads/{thread}/",
        f"/threads/{thread}/checkpoints/{first.pk}/",
        f"/threads/{thread}/diff/?from={first.pk}",
        f"/threads/{thread}/state/",
        "/ledger/?verify=1",
        f"/policies/preview/?policy={policy.pk}",  # it would route the refund: a row of its table
        "/no-such-page/",
    ]
    context = browser.new_context(viewport={"width": 400, "height": 800})
    violations = csp_violations(context)
    page = context.new_page()
    try:
        log_in(page, live_server_url, "ada")
        too_wide = {}
        for path in pages:
            page.goto(f"{live_server_url}{path}")
            if page.evaluate("document.documentElement.scrollWidth > window.innerWidth"):
                too_wide[path] = page.evaluate(OFFENDERS)
        page.context.clear_cookies()
        page.goto(f"{live_server_url}/login/")
        if page.evaluate("document.documentElement.scrollWidth > window.innerWidth"):
            too_wide["/login/"] = page.evaluate(OFFENDERS)
    finally:
        context.close()
    assert too_wide == {}
    assert violations == [], "a page broke its Content-Security-Policy"
