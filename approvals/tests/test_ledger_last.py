"""The ledger's head lock orders every append and is held to the commit: the actions that append
do it as their transaction's last statements, so the lock is not held while the rest runs."""

from datetime import timedelta
from typing import Any

import pytest
from django.db import transaction
from django.utils import timezone

from agents import gates
from agents.tools import Expiry
from approvals.actions.audit import appended_last, do_audit
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.expiry import do_expire_due
from approvals.actions.policies import do_create_policy, do_delete_policy
from approvals.models import ApprovalStatus, AuditEvent, Policy
from approvals.tests.helpers import gate_with_expiry, ledger_written_last
from checkpoints.models import Thread, ThreadStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def policy(when: str, action: str, **fields: object) -> None:
    do_create_policy(
        actor=None,
        fields={
            "name": f"{action} refunds",
            "tool": "issue_refund",
            "when": when,
            "action": action,
            **fields,
        },
        groups=None,
    )


def test_a_policy_appends_its_decision_after_it_resumes_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    policy("args.amount_cents < 5000", "approve")
    open_gates = gates.open_gates

    def opening(**kwargs: Any) -> Any:  # the gates' part of the step's commit, as the runtime's
        with ledger_written_last():
            return open_gates(**kwargs)

    monkeypatch.setattr(gates, "open_gates", opening)
    request_ = make_gate(args={"order_id": "ORD-1001", "amount_cents": 4250})

    assert request_.status == ApprovalStatus.APPROVED
    assert Thread.objects.get(pk=request_.thread_id).status == ThreadStatus.RUNNING
    assert AuditEvent.objects.filter(approval=request_, action="decision.approve").count() == 1


def test_a_signoff_short_of_its_count_appends_after_it_frees_the_request_for_the_next_reviewer() -> None:
    policy("args.amount_cents > 100000", "require", approvers=2)
    request_ = make_gate(args={"order_id": "ORD-1001", "amount_cents": 150000})
    rita = make_user("rita", "reviewer")

    with ledger_written_last():
        do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))

    request_.refresh_from_db()
    assert (request_.status, request_.claimed_by) == (ApprovalStatus.PENDING, None)
    assert AuditEvent.objects.filter(approval=request_, action="decision.signoff").count() == 1


def test_an_expiry_appends_after_it_resumes_the_thread(monkeypatch: pytest.MonkeyPatch) -> None:
    request_ = gate_with_expiry(monkeypatch, Expiry(60, "reject"))

    with ledger_written_last():
        assert do_expire_due(now=timezone.now() + timedelta(seconds=61)) == 1

    assert Thread.objects.get(pk=request_.thread_id).status == ThreadStatus.RUNNING
    assert AuditEvent.objects.filter(approval=request_, action="expiry.reject").count() == 1


def test_deleting_a_policy_appends_what_it_was_after_the_delete() -> None:
    policy("args.amount_cents < 5000", "approve")
    doomed = Policy.objects.get()

    with ledger_written_last():
        do_delete_policy(doomed.pk, actor=None)

    assert not Policy.objects.exists()
    event = AuditEvent.objects.get(action="policy.delete")
    assert event.data["policy"]["id"] == doomed.pk


def test_appends_held_back_are_made_in_order_at_the_end_and_dropped_with_a_rollback() -> None:
    with transaction.atomic(), appended_last():
        do_audit(actor=None, action="thread.message", data={"n": 1})
        with appended_last():  # an inner block leaves them to the outer one
            do_audit(actor=None, action="thread.message", data={"n": 2})
        assert not AuditEvent.objects.exists()
    assert [e.data["n"] for e in AuditEvent.objects.order_by("id")] == [1, 2]

    with pytest.raises(RuntimeError), transaction.atomic(), appended_last():
        do_audit(actor=None, action="thread.message", data={"n": 3})
        raise RuntimeError("the action failed")
    assert AuditEvent.objects.count() == 2
    do_audit(actor=None, action="thread.message", data={"n": 4})  # outside a block: at once
    assert AuditEvent.objects.count() == 3
