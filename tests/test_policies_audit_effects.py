"""`effects` at the gate: a per-thread limit (`effects.sum.amount_cents + args.amount_cents <=
10000`, the README's example) holds whatever the model does. It counts every call of the tool
the thread ran or is about to run, not only the last effects of any tool, and a call approved
earlier at the same gate."""

from datetime import timedelta

import pytest
from django.test import Client
from django.utils import timezone

from agents.runtime import RESULT_PREFIX
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.policies import do_create_policy
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus
from checkpoints.backends import get_backend
from checkpoints.models import PendingWrite
from tests.factories import make_gate, make_user, refunds_at_one_gate

pytestmark = pytest.mark.django_db

LIMIT = "args.amount_cents < 5000 && effects.sum.amount_cents + args.amount_cents <= 10000"


def small_refunds() -> None:
    do_create_policy(
        actor=None,
        fields={"name": "small refunds", "tool": "issue_refund", "when": LIMIT, "action": "approve"},
    )


def test_refunds_asked_at_once_do_not_each_pass_a_per_thread_limit() -> None:
    small_refunds()

    # Three $40 refunds in one message: each is under $50, but $120 is over the $100 a thread.
    asked = refunds_at_one_gate([4000, 4000, 4000])

    assert [r.status for r in asked] == [
        ApprovalStatus.APPROVED,
        ApprovalStatus.APPROVED,
        ApprovalStatus.PENDING,
    ]


def test_many_calls_of_another_tool_do_not_push_a_refund_out_of_the_sum() -> None:
    rita = make_user("rita", "reviewer")
    done = make_gate(args={"order_id": "ORD-1001", "amount_cents": 4900})
    do_decide(done, reviewer=rita, valid=check_decision(done, user=rita, decision="approve"))
    get_backend().put_write(
        thread_id=done.thread_id,
        checkpoint_id=str(done.checkpoint_id),
        task_id=RESULT_PREFIX + done.key,
        kind="result",
        value="refunded",
    )
    PendingWrite.objects.filter(checkpoint_id=done.checkpoint_id, task_id=RESULT_PREFIX + done.key).update(
        created_at=timezone.now() - timedelta(days=1)
    )
    # A thousand calls of another gated tool ran on the thread since (a cheap lookup, say).
    others = ApprovalRequest.objects.bulk_create(
        ApprovalRequest(
            thread_id=done.thread_id,
            checkpoint_id=done.checkpoint_id,
            key=f"call_other_{n}",
            agent="refunds",
            action="lookup_order",
            args={"order_id": f"ORD-{n}"},
            allowed_decisions=done.allowed_decisions,
            state_digest=done.state_digest,
            status=ApprovalStatus.APPROVED,
        )
        for n in range(1000)
    )
    PendingWrite.objects.bulk_create(
        PendingWrite(
            checkpoint_id=done.checkpoint_id, task_id=RESULT_PREFIX + o.key, kind="result", data='"ok"'
        )
        for o in others
    )
    small_refunds()

    # $49 done and $49 asked is $98: allowed. Then $49 more is over $100: a person decides.
    again, over = refunds_at_one_gate([4900, 4900], thread_id=done.thread_id)

    assert (again.status, over.status) == (ApprovalStatus.APPROVED, ApprovalStatus.PENDING)


def test_the_preview_counts_a_refund_the_set_would_approve_earlier_at_the_same_gate() -> None:
    asked = refunds_at_one_gate([4000, 4000, 4000])  # before any policy: all three to a person
    admin = make_user("ada", "admin")
    client = Client(headers={"Authorization": f"Bearer {do_create_token(user=admin)}"})

    body = {"name": "small refunds", "tool": "issue_refund", "when": LIMIT, "action": "approve"}
    answer = client.post("/api/policies/preview", body, content_type="application/json")

    assert answer.status_code == 200, answer.content
    would = {row["request_id"]: row["would"] for row in answer.json()["changed"]}
    # As the gate decides them: the third would be over the thread's $100, so not approved.
    assert would == {
        asked[0].pk: "approved automatically by 'small refunds' v1",
        asked[1].pk: "approved automatically by 'small refunds' v1",
    }
