"""Resuming a LangGraph thread from a `Command(resume=...)`: with several interrupts pending, a
bare answer is ambiguous (422 on the API: resume by id); answers by id decide only theirs."""

import threading

import pytest
from django.db import connection

from agents.actions import InvalidInput
from approvals.actions import langgraph_runs
from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.errors import Conflict
from approvals.actions.langgraph_runs import do_resume
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db


def two_interrupts() -> tuple[ApprovalRequest, ApprovalRequest]:
    """One thread's two pending requests, asked by two interrupts (keys `interrupt:index`)."""
    first = make_gate(args={"order_id": "ORD-1001", "amount_cents": 100})
    other = make_gate(args={"order_id": "ORD-1003", "amount_cents": 300})
    ApprovalRequest.objects.filter(pk=first.pk).update(key="int-a:0")
    ApprovalRequest.objects.filter(pk=other.pk).update(
        key="int-b:0", thread_id=first.thread_id, checkpoint_id=first.checkpoint_id
    )
    return ApprovalRequest.objects.get(pk=first.pk), ApprovalRequest.objects.get(pk=other.pk)


def test_a_bare_answer_with_several_interrupts_pending_is_refused_naming_them() -> None:
    first, other = two_interrupts()
    olga = make_user("olga", "admin")

    with pytest.raises(InvalidInput) as refused:
        do_resume(user=olga, thread_id=first.thread_id, resume={"decisions": [{"type": "approve"}]})

    assert refused.value.errors == {"command": "several interrupts are pending: resume by id (int-a, int-b)"}
    statuses = ApprovalRequest.objects.filter(pk__in=[first.pk, other.pk]).values_list("status", flat=True)
    assert set(statuses) == {ApprovalStatus.PENDING}


def test_an_answer_by_id_decides_that_interrupts_request_only() -> None:
    first, other = two_interrupts()
    olga = make_user("olga", "admin")

    do_resume(
        user=olga,
        thread_id=first.thread_id,
        resume={"int-a": {"decisions": [{"type": "reject", "message": "no"}]}},
    )

    assert ApprovalRequest.objects.get(pk=first.pk).status == ApprovalStatus.REJECTED
    assert ApprovalRequest.objects.get(pk=other.pk).status == ApprovalStatus.PENDING


@pytest.mark.django_db(transaction=True)
def test_a_resume_refused_by_a_concurrent_decision_stores_none_of_its_answers(monkeypatch) -> None:
    """Answers are checked together, then stored; a reviewer who decides one of the requests in
    between makes the resume a 409 that leaves the others pending (it stored the first before)."""
    first, other = two_interrupts()
    olga, rita = make_user("olga", "admin"), make_user("rita", "admin")
    checked = []

    def check_then_rita_decides(request_, **kwargs):
        checked.append(check_decision(request_, **kwargs))
        if len(checked) == 2:  # between the checks and the writes, on a connection of its own
            racing = threading.Thread(target=rita_rejects, args=(other.pk,))
            racing.start()
            racing.join()
        return checked[-1]

    def rita_rejects(pk: int) -> None:
        try:
            request_ = ApprovalRequest.objects.get(pk=pk)
            valid = check_decision(request_, user=rita, decision="reject", message="no")
            do_decide(request_, reviewer=rita, valid=valid)
        finally:
            connection.close()

    monkeypatch.setattr(langgraph_runs, "check_decision", check_then_rita_decides)
    answers = {"int-a": {"decisions": [{"type": "approve"}]}, "int-b": {"decisions": [{"type": "approve"}]}}

    with pytest.raises(Conflict):
        do_resume(user=olga, thread_id=first.thread_id, resume=answers)

    assert ApprovalRequest.objects.get(pk=first.pk).status == ApprovalStatus.PENDING
    assert ApprovalRequest.objects.get(pk=other.pk).decided_by == rita
