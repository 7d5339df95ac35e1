"""Expiry policies: stay pending, auto-reject with a reason for the agent, escalate to a queue."""

from collections.abc import Callable
from datetime import datetime, timedelta
from typing import Any

import pytest
from django.utils import timezone

from agents.gates import decisions_at
from agents.tools import Expiry
from approvals import selectors
from approvals.actions.decisions import DecisionConflict, check_decision, do_decide
from approvals.actions.expiry import do_expire_due
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from approvals.tests.helpers import gate_with_expiry, steps_sent
from checkpoints.models import Thread, ThreadStatus
from tests.factories import make_user

pytestmark = pytest.mark.django_db

GateWith = Callable[[Expiry | None], ApprovalRequest]


@pytest.fixture
def gate_with(monkeypatch: pytest.MonkeyPatch) -> GateWith:
    return lambda expiry: gate_with_expiry(monkeypatch, expiry)


def later(seconds: float) -> datetime:
    return timezone.now() + timedelta(seconds=seconds)


def test_expiry_rejects_bad_policies_when_the_agent_is_defined() -> None:
    with pytest.raises(ValueError, match="positive number of seconds"):
        Expiry(0)
    with pytest.raises(ValueError, match="needs to_queue"):
        Expiry(60, "escalate")
    with pytest.raises(ValueError, match="'reject' or 'escalate'"):
        Expiry(60, "ignore")  # type: ignore[arg-type]


def test_without_a_policy_a_request_stays_pending(gate_with: GateWith) -> None:
    request_ = gate_with(None)

    assert request_.expires_at is None
    assert do_expire_due(now=later(10 * 365 * 86400)) == 0


def test_auto_reject_feeds_the_reason_to_the_agent_resumes_and_is_audited(gate_with: GateWith) -> None:
    request_ = gate_with(Expiry(3600, "reject", reason="Refunds need a decision within the hour."))
    assert request_.expires_at is not None
    assert do_expire_due(now=later(3599)) == 0

    assert do_expire_due(now=later(3601)) == 1

    request_.refresh_from_db()
    assert (request_.status, request_.status_reason) == (ApprovalStatus.EXPIRED, request_.expiry_reason)
    decision = decisions_at(thread_id=request_.thread_id, checkpoint_id=str(request_.checkpoint_id))[
        request_.key
    ]
    assert decision.kind == "reject"
    assert decision.message == "Refunds need a decision within the hour."
    assert Thread.objects.get(pk=request_.thread_id).status == ThreadStatus.RUNNING
    event = AuditEvent.objects.get()
    assert (event.action, event.actor_name, event.data["args_seen"]) == (
        "expiry.reject",
        "system",
        request_.args,
    )


def test_an_expirys_resumed_step_queues_with_new_threads_not_ahead_of_people(
    gate_with: GateWith, monkeypatch: pytest.MonkeyPatch, django_capture_on_commit_callbacks: Any
) -> None:
    request_ = gate_with(Expiry(60, "reject"))
    sent = steps_sent(monkeypatch)

    with django_capture_on_commit_callbacks(execute=True):
        assert do_expire_due(now=later(61)) == 1

    assert sent == [(str(request_.checkpoint_id), False)]


def test_a_default_reason_says_how_long_nobody_decided(gate_with: GateWith) -> None:
    request_ = gate_with(Expiry(7200))

    assert request_.expiry_reason == "No reviewer decided within 2 hours."


def test_escalation_moves_the_request_to_another_queue_and_keeps_it_pending(gate_with: GateWith) -> None:
    rita = make_user("rita", "reviewer", queues=("refunds",))
    sam = make_user("sam", "reviewer", queues=("supervisors",))
    request_ = gate_with(Expiry(900, "escalate", to_queue="supervisors"))
    assert [r.pk for r in selectors.pending_requests(sam)] == []

    assert do_expire_due(now=later(901)) == 1

    request_.refresh_from_db()
    assert (request_.status, request_.queue, request_.escalated_from) == ("pending", "supervisors", "refunds")
    assert request_.expires_at is None
    assert request_.status_reason == "Nobody decided within 15 minutes."
    assert [r.pk for r in selectors.pending_requests(sam)] == [request_.pk]
    assert [r.pk for r in selectors.pending_requests(rita)] == []
    event = AuditEvent.objects.get()
    assert (event.action, event.data["queue"], event.data["to"]) == (
        "expiry.escalate",
        "refunds",
        "supervisors",
    )


def test_a_late_decision_on_an_expired_request_is_refused_with_the_reason(gate_with: GateWith) -> None:
    rita = make_user("rita", "reviewer")
    request_ = gate_with(Expiry(60, "reject", reason="Too slow."))
    do_expire_due(now=later(61))

    with pytest.raises(DecisionConflict) as error:
        do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))

    assert str(error.value) == "Nobody decided this in time; it was rejected automatically: Too slow."


def test_a_decided_request_is_left_alone_by_expiry(gate_with: GateWith) -> None:
    rita = make_user("rita", "reviewer")
    request_ = gate_with(Expiry(60))
    do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))

    assert do_expire_due(now=later(61)) == 0
    request_.refresh_from_db()
    assert request_.status == ApprovalStatus.APPROVED


def test_an_inbox_row_says_what_expiry_does_in_the_decision_pages_words(gate_with: GateWith) -> None:
    from django.test import Client

    rejecting = gate_with(Expiry(3600, "reject"))
    escalating = gate_with(Expiry(3600, "escalate", to_queue="supervisors"))
    page = Client()
    page.force_login(make_user("ada", "admin"))

    inbox = page.get("/").content.decode().lower()
    said = ((rejecting, "rejected automatically in"), (escalating, "escalates to supervisors in"))
    for request_, words in said:
        assert words in inbox
        assert words in page.get(f"/approvals/{request_.pk}/").content.decode().lower()
