"""A push to an open decision page costs only what it sends: a step's push (the conversation
alone, the panel unchanged) reads the request, the thread's head and its requests, never the
checkpoint as asked, the inbox neighbours or the effects lists that only a repainted panel shows;
and the status line it sends is the one a reload renders. The consumer's own render
(approvals.consumers.ThreadConsumer), without a socket."""

import re

import pytest
from django.contrib.auth.models import User
from django.db import connection
from django.test import Client
from django.test.utils import CaptureQueriesContext

from approvals import decision_page
from approvals.actions.claims import do_claim_op
from approvals.consumers import ThreadConsumer
from approvals.models import ApprovalRequest
from tests.factories import make_gate, make_user
from tests.test_decision_page_scale import asked_deep, turns_tagged

pytestmark = pytest.mark.django_db

# The request (with its thread and decider), the thread's head checkpoint and its values, the
# requests its conversation's calls are tagged with; an approved one's standing decisions.
PENDING_PUSH_QUERIES = 5
DECIDED_PUSH_QUERIES = 6


def open_page(request_: ApprovalRequest, *, user: User) -> ThreadConsumer:
    """A decision page's socket as it connected: its request, and the mark of the panel it shows."""
    consumer = ThreadConsumer()
    consumer.scope = {"user": user}
    consumer.thread_id, consumer.request_id, consumer.whole_page = request_.thread_id, request_.pk, False
    fresh = ApprovalRequest.objects.get(pk=request_.pk)
    consumer.panel_mark = decision_page.decision_context(fresh, user=user)["panel_mark"]
    return consumer


def queries_for(consumer: ThreadConsumer, *, with_status: bool) -> tuple[int, str]:
    consumer._render(with_status=with_status)  # caches warm (the agent registry, the user's rights)
    with CaptureQueriesContext(connection) as queries:
        html = consumer._render(with_status=with_status)
    return len(queries), html


@pytest.mark.parametrize("with_status", [False, True], ids=["step", "resync"])
def test_a_push_to_a_pending_requests_page_reads_only_what_it_sends(with_status: bool) -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    page = open_page(request_, user=rita)

    counted, html = queries_for(page, with_status=with_status)

    assert counted == PENDING_PUSH_QUERIES  # was 11: the whole page's context, for every push
    assert 'id="thread-live"' in html
    assert f'id="decision-panel-{request_.pk}"' not in html  # unchanged: not sent
    assert (f'id="request-status-{request_.pk}"' in html) == with_status


def test_a_push_to_a_page_asked_deep_in_a_long_thread_never_reads_the_checkpoint_as_asked() -> None:
    rita = make_user("rita", "reviewer")
    short = open_page(asked_deep(turns=5), user=rita)
    long = open_page(asked_deep(turns=999, statuses=turns_tagged(999)), user=rita)

    counted_short, _ = queries_for(short, with_status=False)
    counted_long, html = queries_for(long, with_status=False)

    assert counted_short == counted_long == DECIDED_PUSH_QUERIES  # was 13
    assert re.search(r"Messages \d+ to (\d+) of \1", html)  # the thread now, a page of it


def status_line(html: str, pk: int) -> str:
    """The status line's markup (up to its closing tag), without what differs between a page
    and a push by design (the CSRF field a push cannot carry, the out-of-band attribute)."""
    start = html.index(f'<div id="request-status-{pk}"')
    depth, at = 0, start
    for tag in re.finditer(r"<(/?)div\b", html[start:]):
        depth += -1 if tag.group(1) else 1
        if depth == 0:
            at = start + tag.end()
            break
    line = re.sub(r'<input type="hidden" name="csrfmiddlewaretoken"[^>]*>', "", html[start:at])
    return re.sub(r"\s+", " ", line.replace(' hx-swap-oob="true"', "")).strip()


def test_a_pushed_status_line_is_the_one_a_reload_renders() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate()
    page = open_page(request_, user=rita)
    do_claim_op(ApprovalRequest.objects.get(pk=request_.pk), user=rita, op="claim", to="")

    pushed = page._render(with_status=True)
    client = Client()
    client.force_login(rita)
    reloaded = client.get(f"/approvals/{request_.pk}/").content.decode()

    assert "claimed by you" in status_line(pushed, request_.pk)
    assert status_line(pushed, request_.pk) == status_line(reloaded, request_.pk)
