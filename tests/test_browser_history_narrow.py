"""At 400 px the thread page's history keeps each checkpoint's row right of its step number,
inside its branch line: what wraps (the time, the head tag) wraps under the row, not under the
step or left of the line."""

import json

import pytest
from playwright.sync_api import Browser

from approvals.actions.threads import do_edit_state, do_fork_thread
from checkpoints.backends import get_backend
from checkpoints.models import Checkpoint
from tests.browser import browser_fixture, csp_violations, log_in, off_loop  # noqa: F401  (fixtures)
from tests.factories import make_gate, make_user

pytestmark = [pytest.mark.django_db(transaction=True), pytest.mark.browser]

# Every piece of every history row that starts left of its row's step number's right edge, or
# left of its branch line.
OUTSIDE = """() => [...document.querySelectorAll('.history .node')].flatMap(node => {
  const step = node.querySelector(':scope > a .step').getBoundingClientRect();
  const line = node.closest('.line').getBoundingClientRect();
  const pieces = ':scope > a .tag, :scope > a .who, :scope > a time, :scope > a .node-name';
  return [...node.querySelectorAll(pieces)]
    .filter(p => p.getBoundingClientRect().left < Math.max(step.right, line.left) - 0.5)
    .map(p => node.dataset.step + ': ' + p.textContent.trim());
})"""


def edited_and_forked() -> str:
    olga = make_user("olga_operator_with_a_long_name", "operator")
    request_ = make_gate()
    values = get_backend().get(thread_id=request_.thread_id).values
    values["messages"][-1]["tool_calls"][0]["function"]["arguments"] = json.dumps(
        {"order_id": "ORD-1001", "amount_cents": 3000}
    )
    do_edit_state(request_.thread_id, user=olga, values=values)
    first = Checkpoint.objects.filter(thread_id=request_.thread_id).order_by("step").first()
    assert first is not None
    do_fork_thread(request_.thread_id, user=olga, checkpoint_id=str(first.pk), values=None)
    return request_.thread_id


def test_the_history_rows_stay_inside_their_branch_line_at_400_px(
    browser: Browser, live_server_url: str
) -> None:
    make_user("ada", "admin")
    thread_id = off_loop(edited_and_forked)
    context = browser.new_context(viewport={"width": 400, "height": 900})
    violations = csp_violations(context)
    page = context.new_page()
    try:
        log_in(page, live_server_url, "ada")
        page.goto(f"{live_server_url}/threads/{thread_id}/")
        assert page.locator(".history .node").count() >= 4
        outside = page.evaluate(OUTSIDE)
    finally:
        context.close()
    assert outside == []
    assert violations == []
