"""A reviewer's edit is a new proposal: the policies the gate tried on the model's proposal are
tried on it too (edit_refusal). One person must not edit a small refund into one that a policy
denies, routes to a queue they may not decide, or leaves to two approvers."""

import json
from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from approvals.access import Access
from approvals.actions.policies import do_create_policy
from approvals.actions.policy_gates import edit_refusal
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

SMALL = {"order_id": "ORD-1001", "amount_cents": 4250}
HUGE = {"order_id": "ORD-1001", "amount_cents": 150000}


def policy(name: str, when: str, action: str, **fields: Any) -> None:
    do_create_policy(
        actor=None, fields={"name": name, "tool": "issue_refund", "when": when, "action": action, **fields}
    )


def refusal(request_: ApprovalRequest, args: dict[str, Any], user: Any) -> str:
    with transaction.atomic():
        return edit_refusal(request_, args=args, may_decide=Access.of(user).can_decide)


def test_an_edit_into_what_a_policy_requires_two_approvers_for_is_refused() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate(args=SMALL)  # before the policy: waits for one person
    policy("two people", "args.amount_cents > 100000", "require", approvers=2)

    assert refusal(request_, HUGE, rita) == (
        "Policy 'two people' v1 requires 2 approvers for these arguments; this request waits for 1"
    )
    assert refusal(request_, {**SMALL, "amount_cents": 5000}, rita) == ""


def test_an_edit_a_deny_covers_is_refused_with_its_message_and_an_approve_refuses_nothing() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate(args=SMALL)
    policy("no big", "args.amount_cents > 100000", "deny", message="Ask finance.", order=1)
    policy("anything", "true", "approve", order=2)

    assert refusal(request_, HUGE, rita) == "Policy 'no big' v1 denies these arguments: Ask finance."
    assert refusal(request_, {**SMALL, "amount_cents": 100}, rita) == ""


def test_an_edit_routed_to_a_queue_the_reviewer_may_not_decide_is_refused() -> None:
    rita, ada = make_user("rita", "reviewer"), make_user("ada", "admin")
    make_user("sue", "reviewer", queues=("supervisors",))  # the queue is restricted to its team
    request_ = make_gate(args=SMALL)
    policy("large refunds", "args.amount_cents > 50000", "route", queue="supervisors")

    assert "sends these arguments to the 'supervisors' queue" in refusal(request_, HUGE, rita)
    assert refusal(request_, HUGE, ada) == ""  # an admin decides every queue


def test_an_edit_a_policy_cannot_evaluate_is_left_to_the_reviewer_making_it() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate(args=SMALL)
    policy("by currency", "args.currency == 'EUR'", "deny")

    assert refusal(request_, HUGE, rita) == ""


def test_one_reviewer_cannot_edit_a_small_refund_into_one_the_two_person_rule_covers() -> None:
    rita = make_user("rita", "reviewer")
    request_ = make_gate(args=SMALL)
    policy("two people", "args.amount_cents > 100000", "require", approvers=2)
    client = Client(headers={"Authorization": f"Bearer {do_create_token(user=rita)}"})

    answer = client.post(
        f"/api/approvals/{request_.pk}/decision",
        json.dumps({"decision": "edit", "args": HUGE}),
        content_type="application/json",
    )

    assert answer.status_code == 400, answer.content
    assert "requires 2 approvers" in answer.content.decode()
    page = Client()
    page.force_login(rita)
    form = {"decision": "edit", **{f"args.{k}": str(v) for k, v in HUGE.items()}}
    shown = page.post(f"/approvals/{request_.pk}/", form)
    assert shown.status_code == 400 and "requires 2 approvers" in shown.content.decode()
    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.PENDING
    assert ApprovalRequest.objects.get(pk=request_.pk).decision_args is None
