"""After a full render of an inbox (more changes than INBOX_LIMIT, a resync, new rights), its
socket says why each row it had sent before is gone, as a row's own push would: decided by
whom, and nothing for the reviewer's own decision or for a row that only fell past the limit.
The inbox push's own render (approvals.inbox_push), without a socket."""

import re
from typing import Any

import pytest
from django.http import QueryDict

from approvals import inbox_push
from approvals.models import ApprovalRequest
from approvals.selectors import InboxFilter
from approvals.tests.test_two_person import decide
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def inbox_of(user: Any) -> inbox_push.InboxView:
    viewer = inbox_push.Viewer(user, set(), {"refunds"}, can_claim=True, can_read_ledger=False)
    view = inbox_push.InboxView(viewer=viewer, filters=InboxFilter(), query=QueryDict())
    view.reset(list(ApprovalRequest.objects.filter(status="pending")), total=0)
    return view


def rerendered(view: inbox_push.InboxView, *, shown: list[ApprovalRequest]) -> dict[str, str]:
    """A full render that lists `shown`: what the page is told of each row that left, by id."""
    was = view.order
    view.reset(shown, total=len(shown))
    said = view.changes_html(was=was, items=shown)
    return dict(re.findall(r'<span data-left="(\d+)"(?: data-quiet>|>)(.*?)</span>', said))


def test_a_full_render_says_why_rows_left_and_nothing_for_your_own_decision_or_past_the_limit() -> None:
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    by_sam, by_rita, past_limit, stays = make_gate(), make_gate(), make_gate(), make_gate()
    page = inbox_of(rita)
    decide(by_sam, sam, decision="reject", message="not now")
    decide(by_rita, rita, decision="approve")

    said = rerendered(page, shown=[stays])  # past_limit is still pending: beyond the rows shown

    assert said == {
        str(by_sam.pk): f"Request {by_sam.pk} was rejected by sam and left your list",
        str(by_rita.pk): "",  # accounted for, and not read out: she knows
        str(past_limit.pk): "",
    }
