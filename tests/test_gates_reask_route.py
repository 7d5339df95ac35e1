"""A gate asked again (after an edit) whose earlier request escalated, when a route policy saved
in between matches it. Before, the escalation was kept after the policies ran: the request sat
with the supervisors, marked escalated, while it and the ledger said the policy routed it
(`policy.route`). An escalation is a deadline that passed on the earlier request, with its
reviewers; a route is an admin's rule on these arguments. The route stands when it sends the
request to reviewers who never had it (timed anew there); sent back to those who let it lapse,
it stays escalated, and the ledger records the move."""

from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.tools import Expiry
from approvals.actions.expiry import do_expire_due
from approvals.actions.policies import do_create_policy
from approvals.actions.threads import do_edit_state
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from approvals.tests.helpers import refunds_expire
from checkpoints.backends import get_backend
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def asked_again_after_escalation(monkeypatch: pytest.MonkeyPatch, *, route_to: str) -> ApprovalRequest:
    """A refunds gate escalated to the supervisors, a route policy to `route_to` saved, and
    the gate asked again by an operator's edit: the new pending request."""
    olga = make_user("olga", "operator")
    refunds_expire(monkeypatch, Expiry(900, "escalate", to_queue="supervisors"))
    first = make_gate()
    assert do_expire_due(now=timezone.now() + timedelta(seconds=901)) == 1
    fields: dict[str, Any] = {
        "name": "big refunds",
        "tool": "issue_refund",
        "when": "true",
        "action": "route",
        "queue": route_to,
    }
    do_create_policy(actor=None, fields=fields)

    values = get_backend().get(thread_id=first.thread_id).values
    values["messages"][-1]["content"] = "Refunding the order in full."
    do_edit_state(first.thread_id, user=olga, values=values)

    again = ApprovalRequest.objects.get(thread_id=first.thread_id, status=ApprovalStatus.PENDING)
    assert again.supersedes_id == first.pk
    return again


def ledger(request_: ApprovalRequest) -> list[tuple[str, Any]]:
    events = AuditEvent.objects.filter(approval=request_).order_by("pk")
    return [(e.action, e.data.get("queue")) for e in events]


def test_a_route_to_other_reviewers_stands_and_the_request_says_so(monkeypatch: pytest.MonkeyPatch) -> None:
    again = asked_again_after_escalation(monkeypatch, route_to="finance")

    # Where the policy sent it, not escalated, timed anew for reviewers who never had it.
    assert (again.queue, again.escalated_from, again.status_reason) == ("finance", "", "")
    assert again.policy_name == "big refunds" and again.expires_at is not None
    assert ledger(again)[-1] == ("policy.route", "finance")


def test_a_route_back_to_the_reviewers_who_let_it_lapse_keeps_it_escalated_and_says_so(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    again = asked_again_after_escalation(monkeypatch, route_to="refunds")

    assert (again.queue, again.escalated_from, again.expires_at) == ("supervisors", "refunds", None)
    assert again.status_reason == "Nobody decided within 15 minutes."
    # The ledger says where it went after the route, and why.
    assert ledger(again)[-2:] == [("policy.route", "refunds"), ("expiry.escalate", "refunds")]
    moved = AuditEvent.objects.filter(approval=again).latest("pk").data
    assert (moved["to"], moved["reason"]) == ("supervisors", "Nobody decided within 15 minutes.")
