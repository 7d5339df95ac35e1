"""A decision made after a request's deadline, before the expiry sweep (every
INBOX_SWEEP_INTERVAL_S) reaches it, is a 409 that changes nothing: the expiry decides it (a
rejection, or an escalation that the original queue could otherwise pre-empt). A claim then is
refused alike. The sweep then handles it as usual. Over the HTTP API (Django's test client)."""

from datetime import timedelta
from typing import Any

import pytest
from django.test import Client
from django.utils import timezone

from agents.tools import Expiry
from approvals.actions.decisions import DecisionConflict, check_decision, do_decide
from approvals.actions.expiry import do_expire_due
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from approvals.tests.helpers import gate_with_expiry
from checkpoints.models import Thread
from tests.factories import make_user

pytestmark = pytest.mark.django_db


def api(user: Any) -> Client:
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=user)}"})


def past_its_deadline(request_: ApprovalRequest) -> None:
    """The deadline passed a moment ago; the sweep has not run yet."""
    ApprovalRequest.objects.filter(pk=request_.pk).update(expires_at=timezone.now() - timedelta(seconds=1))


def snapshot(request_: ApprovalRequest) -> tuple[Any, ...]:
    row = ApprovalRequest.objects.get(pk=request_.pk)
    thread = Thread.objects.get(pk=request_.thread_id)
    return (
        row.status,
        row.queue,
        row.claimed_by_id,
        row.decided_by_id,
        thread.status,
        AuditEvent.objects.count(),
    )


DECISIONS = [
    {"decision": "approve"},
    {"decision": "edit", "args": {"order_id": "ORD-1001", "amount_cents": 100}},
    {"decision": "reject", "message": "no"},
]


@pytest.mark.parametrize("body", DECISIONS, ids=lambda b: b["decision"])
@pytest.mark.parametrize("expiry", ["reject", "escalate"])
def test_a_decision_past_the_deadline_before_the_sweep_is_a_409_that_changes_nothing(
    monkeypatch: pytest.MonkeyPatch, body: dict[str, Any], expiry: str
) -> None:
    rita = make_user("rita", "reviewer", queues=("refunds",))
    policy = Expiry(60, "escalate", to_queue="supervisors") if expiry == "escalate" else Expiry(60, "reject")
    request_ = gate_with_expiry(monkeypatch, policy)
    past_its_deadline(request_)
    before = snapshot(request_)

    response = api(rita).post(f"/api/approvals/{request_.pk}/decision", body, content_type="application/json")

    assert response.status_code == 409, response.content
    then = "escalated to supervisors." if expiry == "escalate" else "rejected automatically."
    assert response.json()["detail"] == (
        f"This request expired: nobody decided it in time, and it is being {then} Nothing was changed."
    )
    assert snapshot(request_) == before


@pytest.mark.parametrize("op", ["claim", "reassign"])
def test_a_claim_past_the_deadline_is_a_409(monkeypatch: pytest.MonkeyPatch, op: str) -> None:
    make_user("rita", "reviewer")
    ada = make_user("ada", "admin")
    request_ = gate_with_expiry(monkeypatch, Expiry(60, "reject"))
    past_its_deadline(request_)
    before = snapshot(request_)

    response = api(ada).post(
        f"/api/approvals/{request_.pk}/claim", {"op": op, "to": "rita"}, content_type="application/json"
    )

    assert response.status_code == 409, response.content
    assert "expired" in response.json()["detail"]
    assert snapshot(request_) == before


def test_a_deadline_passing_between_the_check_and_the_lock_is_refused_too(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rita = make_user("rita", "reviewer")
    request_ = gate_with_expiry(monkeypatch, Expiry(60, "reject"))
    valid = check_decision(request_, user=rita, decision="approve")  # in time
    past_its_deadline(request_)

    with pytest.raises(DecisionConflict, match="expired"):
        do_decide(request_, reviewer=rita, valid=valid)

    assert ApprovalRequest.objects.get(pk=request_.pk).status == ApprovalStatus.PENDING


def test_after_the_sweep_escalates_it_the_new_queue_decides(monkeypatch: pytest.MonkeyPatch) -> None:
    rita = make_user("rita", "reviewer", queues=("refunds",))
    sam = make_user("sam", "reviewer", queues=("supervisors",))
    request_ = gate_with_expiry(monkeypatch, Expiry(60, "escalate", to_queue="supervisors"))
    past_its_deadline(request_)
    refused = api(rita).post(
        f"/api/approvals/{request_.pk}/decision", {"decision": "approve"}, content_type="application/json"
    )
    assert refused.status_code == 409

    assert do_expire_due() == 1

    decided = api(sam).post(
        f"/api/approvals/{request_.pk}/decision", {"decision": "approve"}, content_type="application/json"
    )
    assert decided.status_code == 200, decided.content
    row = ApprovalRequest.objects.get(pk=request_.pk)
    assert (row.status, row.queue, row.decided_by_id) == (ApprovalStatus.APPROVED, "supervisors", sam.pk)
