"""A standing decision approves the tool's later calls, which open in the queue its gate names:
only a reviewer who may decide that queue makes one. A request a route policy or an escalation
moved to another queue is approved alone by a reviewer of that queue who may not decide it."""

import pytest
from django.test import Client

from approvals.actions.policies import do_create_policy
from approvals.models import ApprovalRequest, ApprovalStatus, Policy
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

LARGE = {"order_id": "ORD-1001", "amount_cents": 60000}


def client_for(user: object) -> Client:
    client = Client()
    client.force_login(user)  # type: ignore[arg-type]
    return client


def stand(client: Client, request_: ApprovalRequest) -> object:
    return client.post(f"/approvals/{request_.pk}/", {"decision": "approve", "standing": "tool", "until": ""})


def supervisor() -> object:
    make_user("rob", "reviewer", queues=("refunds",))  # refunds: its team only, sue is not in it
    return make_user("sue", "reviewer", queues=("supervisors",))


def test_a_request_a_route_moved_is_approved_alone_by_a_reviewer_of_its_queue_only() -> None:
    sue = supervisor()
    do_create_policy(
        actor=None,
        fields={
            "name": "large refunds",
            "tool": "issue_refund",
            "when": "args.amount_cents > 50000",
            "action": "route",
            "queue": "supervisors",
        },
    )
    request_ = make_gate(args=LARGE)
    assert request_.queue == "supervisors"
    client = client_for(sue)

    refused = stand(client, request_)

    assert refused.status_code == 403  # type: ignore[attr-defined]
    assert "approve this request alone" in refused.content.decode()  # type: ignore[attr-defined]
    assert not Policy.objects.exclude(thread_id="").exists()
    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.PENDING
    client.post(f"/approvals/{request_.pk}/", {"decision": "approve"})
    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.APPROVED


def test_a_request_an_escalation_moved_is_approved_alone_by_a_reviewer_of_its_queue_only() -> None:
    sue = supervisor()
    request_ = make_gate(args=LARGE)
    # Nobody in refunds decided in time: the request escalated to supervisors.
    ApprovalRequest.objects.filter(pk=request_.pk).update(queue="supervisors", escalated_from="refunds")

    refused = stand(client_for(sue), request_)

    assert refused.status_code == 403  # type: ignore[attr-defined]
    assert "approve this request alone" in refused.content.decode()  # type: ignore[attr-defined]
    assert not Policy.objects.exists()
