"""Under the two-person rule an edit restarts the count with the edited arguments, so the next
reviewer's approval is for those. Each reviewer must see them where they approve, or one reviewer
alone picks what runs: sam edits a $1,500 refund to $9,876.54 and tom, shown $1,500 on the
decision page and in his inbox row, approves $9,876.54, which the ledger then says he saw as
$1,500. Now the decision page shows the arguments its Approve is for, an approval from a row
(which shows the proposal) of arguments edited since is refused, and the ledger records the
arguments each approver was shown."""

import re

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.policies import do_create_policy
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

PROPOSED = {"order_id": "ORD-1001", "amount_cents": 150000}
EDITED = {"order_id": "ORD-1001", "amount_cents": 987654}


@pytest.fixture
def edited_by_sam() -> ApprovalRequest:
    """A refund two reviewers must approve, which sam edited (his approval is the first)."""
    do_create_policy(
        actor=None,
        fields={
            "name": "two people",
            "tool": "issue_refund",
            "when": "args.amount_cents > 100000",
            "action": "require",
            "approvers": 2,
        },
    )
    gate = make_gate(args=PROPOSED)
    sam = make_user("sam", "reviewer")
    do_decide(gate, reviewer=sam, valid=check_decision(gate, user=sam, decision="edit", args=EDITED))
    gate.refresh_from_db()
    assert (gate.status, gate.decision_args) == (ApprovalStatus.PENDING, EDITED)
    return gate


def page(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def proposal(html: str) -> str:
    """The panel's proposal: from its heading to the buttons, as text."""
    start, end = html.index("Proposed issue_refund"), html.index('name="args_seen"')
    return re.sub(r"\s+", " ", re.sub(r"<[^>]+>", " ", html[start:end]))


def test_the_next_reviewer_is_shown_the_arguments_their_approval_is_for(
    edited_by_sam: ApprovalRequest,
) -> None:
    tom, path = make_user("tom", "reviewer"), f"/approvals/{edited_by_sam.pk}/"
    html = page(tom).get(path).content.decode()

    shown = proposal(html)
    assert "$9,876.54" in shown and "987654" in shown
    assert "$1,500.00" not in shown and "150000" not in shown
    # The edit form starts from the arguments as they stand, not from the ones sam replaced.
    assert re.search(r'name="args.amount_cents" value="987654"', html)

    mark = re.search(r'name="args_seen" value="([^"]+)"', html)
    assert mark is not None
    approved = page(tom).post(path, {"decision": "approve", "args_seen": mark[1]})

    assert approved.status_code == 302
    done = ApprovalRequest.objects.get(pk=edited_by_sam.pk)
    assert (done.status, done.decision_args, done.decided_by) == (ApprovalStatus.EDITED, EDITED, tom)
    # The ledger says what tom was shown and approved: the edited arguments, on both his events.
    for action in ("decision.signoff", "decision.edit"):
        event = AuditEvent.objects.get(approval_ref=edited_by_sam.pk, actor_name="tom", action=action)
        assert event.data["args_seen"] == EDITED, action


def test_an_approval_from_a_row_showing_the_proposal_is_refused_once_it_was_edited(
    edited_by_sam: ApprovalRequest,
) -> None:
    tom = make_user("tom", "reviewer")
    # The inbox row says "Refund $1,500.00"; its `a` key posts a bare approve (static/inbox-keys.js).
    row = page(tom).get("/").content.decode()
    assert "$1,500.00" in row

    path = f"/approvals/{edited_by_sam.pk}/"
    answer = page(tom).post(path, {"decision": "approve"}, headers={"HX-Request": "true"})

    assert answer.status_code == 409
    assert "read them again" in answer.content.decode()
    still = ApprovalRequest.objects.get(pk=edited_by_sam.pk)
    assert (still.status, still.decision_args) == (ApprovalStatus.PENDING, EDITED)
    assert list(still.signoffs.values_list("reviewer__username", flat=True)) == ["sam"]
