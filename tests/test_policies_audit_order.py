"""Policies are tried in `order`; only standing decisions (approvals a reviewer scoped to one
thread) come after every other policy. An admin's deny, route or require scoped to one thread
is no standing decision: it keeps its order, before a policy for all threads with a higher one."""

import uuid
from typing import Any

import pytest
from django.test import Client

from approvals.actions.policies import do_create_policy
from approvals.actions.policy_gates import do_apply_policies
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

ARGS = {"order_id": "ORD-1001", "amount_cents": 1200}


def policy(name: str, action: str, *, order: int, **fields: Any) -> None:
    do_create_policy(
        actor=None,
        fields={
            "name": name,
            "tool": "issue_refund",
            "when": "true",
            "action": action,
            "order": order,
            **fields,
        },
    )


def next_call(request_: ApprovalRequest) -> ApprovalRequest:
    """Another call of the tool, later on the same thread, through the gate's policies."""
    later = ApprovalRequest.objects.get(pk=request_.pk)
    later.pk, later.key = None, f"call_{uuid.uuid4().hex[:8]}"
    later.save()
    do_apply_policies([later], thread_id=later.thread_id, agent=later.agent)
    later.refresh_from_db()
    return later


@pytest.mark.parametrize(
    ("action", "fields", "expected"),
    [
        ("deny", {"message": "Not on this thread."}, ("rejected", "refunds")),
        ("route", {"queue": "supervisors"}, ("pending", "supervisors")),
        ("require", {"approvers": 2}, ("pending", "refunds")),
    ],
)
def test_an_admins_policy_scoped_to_a_thread_keeps_its_order_before_a_later_policy_for_all(
    action: str, fields: dict[str, Any], expected: tuple[str, str]
) -> None:
    first = make_gate(args=ARGS)  # before any policy: to a person
    policy("small refunds", "approve", order=10)
    policy(f"watched thread {action}", action, order=1, thread_id=first.thread_id, **fields)

    request_ = next_call(first)

    assert (request_.status, request_.queue) == expected
    assert request_.policy_name == f"watched thread {action}"
    event = AuditEvent.objects.filter(approval_ref=request_.pk).exclude(action="request.open").last()
    assert event is not None and event.data["policy"]["name"] == f"watched thread {action}"
    # Another thread is not watched: the policy for all threads decides.
    assert make_gate(args=ARGS).status == ApprovalStatus.APPROVED


def test_a_standing_approval_still_comes_after_a_policy_for_all_threads_whatever_its_order() -> None:
    first = make_gate(args=ARGS)
    policy("no refunds", "deny", order=100, message="No.")
    policy("standing approval", "approve", order=1, thread_id=first.thread_id)

    assert next_call(first).status == ApprovalStatus.REJECTED


def test_the_preview_leaves_out_a_thread_policy_the_gate_left_out_made_before_its_thread() -> None:
    # Saved for a thread id before any thread had it: the gate of a thread started under that id
    # later is not decided by it (a thread's policy is made on the thread), nor is its preview.
    policy("watched thread deny", "deny", order=1, thread_id="refunds-later", message="No.")
    request_ = make_gate(args=ARGS, thread_id="refunds-later")
    assert request_.status == ApprovalStatus.PENDING
    admin = Client(headers={"Authorization": f"Bearer {do_create_token(user=make_user('ada', 'admin'))}"})

    body = {"name": "none", "tool": "issue_refund", "when": "false", "action": "approve"}
    answer = admin.post("/api/policies/preview", body, content_type="application/json")

    assert answer.status_code == 200, answer.content
    assert answer.json()["changed"] == []
    assert answer.json()["counts"] == {"to a person": 1}
