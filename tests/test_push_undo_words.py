"""A request whose decision was undone comes back to open inboxes saying so, to each viewer in
their own words (who undid whose decision), never as a new request; the ledger says who. The
inbox push's own render (approvals.inbox_push), without a socket."""

import html
import uuid
from typing import Any

import pytest
from django.http import QueryDict

from approvals import inbox_push
from approvals.actions.claims import do_claim_op
from approvals.actions.undo import do_undo
from approvals.models import ApprovalRequest
from approvals.selectors import InboxFilter
from approvals.tests.test_two_person import decide
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def inbox_of(user: Any) -> inbox_push.InboxView:
    """An open inbox of every queue, as its last render left it (the pending requests)."""
    viewer = inbox_push.Viewer(user, set(), {"refunds"}, can_claim=True, can_read_ledger=False)
    view = inbox_push.InboxView(viewer=viewer, filters=InboxFilter(), query=QueryDict())
    view.reset(list(ApprovalRequest.objects.filter(status="pending")), total=0)
    return view


def heard(view: inbox_push.InboxView, request_: ApprovalRequest) -> str:
    """What the page is told of the request's row (inserted by the push of its change)."""
    change = inbox_push.change_for(event_id=uuid.uuid4().hex, request_ids=[request_.pk])
    swaps = view.apply(change, [request_.pk]) or ""
    assert f'<div id="approval-{request_.pk}"' in swaps  # inserted
    start = swaps.find(f'<span data-back="{request_.pk}">')
    return (
        "" if start < 0 else html.unescape(swaps[swaps.index(">", start) + 1 : swaps.index("</span>", start)])
    )


@pytest.fixture(autouse=True)
def undo_window(settings: Any) -> None:
    settings.DECISION_UNDO_S = 60


def test_an_undo_by_the_reviewer_who_decided_is_said_to_each_inbox_in_its_own_words() -> None:
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = make_gate()
    decide(request_, rita, decision="approve")
    ritas, sams = inbox_of(rita), inbox_of(sam)

    do_undo(request_.pk, user=rita)

    n = request_.pk
    assert heard(ritas, request_) == f"Your decision on request {n} was undone; it is back in your list"
    assert heard(sams, request_) == f"rita undid their decision on request {n}; it is back in your list"


def test_an_admins_undo_of_a_reviewers_decision_names_both() -> None:
    rita, sam, ada = make_user("rita", "reviewer"), make_user("sam", "reviewer"), make_user("ada", "admin")
    request_ = make_gate()
    decide(request_, rita, decision="reject", message="not now")
    ritas, sams, adas = inbox_of(rita), inbox_of(sam), inbox_of(ada)

    do_undo(request_.pk, user=ada)

    n = request_.pk
    assert heard(ritas, request_) == f"ada undid your decision on request {n}; it is back in your list"
    assert heard(adas, request_) == f"You undid rita's decision on request {n}; it is back in your list"
    assert heard(sams, request_) == f"ada undid rita's decision on request {n}; it is back in your list"


def test_a_new_request_and_one_released_since_its_undo_are_not_said_to_be_undone() -> None:
    rita = make_user("rita", "reviewer")
    undone = make_gate()
    decide(undone, rita, decision="approve")
    do_undo(undone.pk, user=rita)
    do_claim_op(ApprovalRequest.objects.get(pk=undone.pk), user=rita, op="release", to="")
    ApprovalRequest.objects.filter(pk=undone.pk).update(status="approved")  # off her page...
    ritas = inbox_of(rita)
    ApprovalRequest.objects.filter(pk=undone.pk).update(status="pending")  # ...and back, unclaimed
    new = make_gate()

    assert heard(ritas, undone) == ""
    assert heard(ritas, new) == ""
