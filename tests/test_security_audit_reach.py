"""A reviewer's reach ends at the queues they may decide, for the newer paths too: a standing
decision ("Approve, and keep approving on this thread") made on a request a policy routed to
another queue would approve the tool's later calls on the thread, which are raised in the queue
the gate names, so only a reviewer who may decide that queue makes one; and an undo reopens a
decision, so only someone who may still decide the request's queue undoes it."""

import pytest
from django.contrib.auth.models import Group, User
from django.test import Client
from pytest_django.fixtures import Settings

from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.policies import do_create_policy
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent, Policy
from approvals.roles import REVIEWER
from tests.factories import make_gate, make_user, refunds_at_one_gate

pytestmark = pytest.mark.django_db

LARGE = {"order_id": "ORD-1001", "amount_cents": 60000}


def page(user: User) -> Client:
    client = Client()
    client.force_login(user)
    return client


def routed_to_supervisors() -> ApprovalRequest:
    """A refund the README's "large refunds" policy routed from `refunds` to `supervisors`."""
    admin = make_user("ada", "admin")
    do_create_policy(
        actor=admin,
        fields={
            "name": "large refunds",
            "tool": "issue_refund",
            "when": "args.amount_cents > 50000",
            "action": "route",
            "queue": "supervisors",
            "order": 20,
        },
    )
    gate = make_gate(args=LARGE)
    assert gate.queue == "supervisors"
    return gate


def test_a_reviewer_of_a_routed_request_cannot_approve_the_tool_in_the_queue_they_may_not_decide() -> None:
    make_user("rita", "reviewer", queues=("refunds",))  # refunds: its team only
    sue = make_user("sue", "reviewer", queues=("supervisors",))
    gate = routed_to_supervisors()

    # Every later refund on the thread under $500 would be raised in `refunds`, which sue may
    # not decide: her standing decision would approve each of them for her.
    answer = page(sue).post(f"/approvals/{gate.pk}/", {"decision": "approve", "standing": "tool"})

    assert answer.status_code == 403
    assert "refunds" in answer.content.decode()
    assert not Policy.objects.filter(thread_id=gate.thread_id).exists()
    gate.refresh_from_db()
    assert gate.status == ApprovalStatus.PENDING
    events = AuditEvent.objects.filter(thread_id=gate.thread_id)
    assert not events.filter(action__in=("decision.approve", "policy.create")).exists()
    # The request itself is hers to decide.
    assert page(sue).post(f"/approvals/{gate.pk}/", {"decision": "approve"}).status_code == 302
    gate.refresh_from_db()
    assert (gate.status, gate.decided_by) == (ApprovalStatus.APPROVED, sue)


def test_a_reviewer_of_both_queues_may_still_approve_the_tool_for_the_thread() -> None:
    make_user("rita", "reviewer", queues=("refunds",))
    both = make_user("bo", "reviewer", queues=("refunds", "supervisors"))
    gate = routed_to_supervisors()

    answer = page(both).post(f"/approvals/{gate.pk}/", {"decision": "approve", "standing": "tool"})

    assert answer.status_code == 302
    assert Policy.objects.get(thread_id=gate.thread_id).created_by == both
    # What the standing decision reaches: the thread's next refund, raised in `refunds`.
    (later,) = refunds_at_one_gate([2000], thread_id=gate.thread_id)  # the model's next refund
    assert (later.queue, later.status, later.decided_by) == ("refunds", ApprovalStatus.APPROVED, None)
    assert later.policy_name.startswith("standing approval of this tool by bo")


def test_a_reviewer_who_lost_the_reviewer_role_cannot_undo_their_decision(settings: Settings) -> None:
    settings.DECISION_UNDO_S = 60
    rita = make_user("rita", "reviewer", "operator")  # an operator still sees every queue
    gate = make_gate()
    do_decide(gate, reviewer=rita, valid=check_decision(gate, user=rita, decision="reject", message="no"))
    rita.groups.remove(Group.objects.get(name=REVIEWER))
    rita = User.objects.get(pk=rita.pk)  # as her next request loads her

    answer = page(rita).post(f"/approvals/{gate.pk}/undo/")

    assert answer.status_code == 403
    gate.refresh_from_db()
    assert (gate.status, gate.decided_by, gate.claimed_by) == (ApprovalStatus.REJECTED, rita, None)
    assert not AuditEvent.objects.filter(action="decision.undo").exists()
