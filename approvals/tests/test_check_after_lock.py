"""Permissions and state are checked on the locked row: a request escalated to another queue
between a reviewer's page load (or check) and her decision or claim is refused, not decided."""

import threading
from datetime import timedelta
from typing import Any

import pytest
from django.db import connection
from django.utils import timezone

from agents.gates import decisions_at
from agents.tools import Expiry
from approvals.actions import expiry
from approvals.actions.claims import check_may_claim, do_claim
from approvals.actions.decisions import NotAllowed, check_decision, do_decide
from approvals.actions.expiry import do_expire_due
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from approvals.tests.helpers import gate_with_expiry
from tests.at_once import in_thread, waiting_for_a_lock
from tests.factories import make_user


def escalating_gate(monkeypatch: pytest.MonkeyPatch) -> ApprovalRequest:
    """A refunds request that escalates to 'leads' (a queue rita does not see) after a minute."""
    make_user("lee", "reviewer", queues=("leads",))
    return gate_with_expiry(monkeypatch, Expiry(60, "escalate", to_queue="leads"))


def assert_undecided_in_leads(request_: ApprovalRequest) -> None:
    request_.refresh_from_db()
    assert (request_.status, request_.queue, request_.decided_by) == (ApprovalStatus.PENDING, "leads", None)
    assert decisions_at(thread_id=request_.thread_id, checkpoint_id=str(request_.checkpoint_id)) == {}
    assert not AuditEvent.objects.filter(action__startswith="decision.").exists()


@pytest.mark.django_db
def test_a_decision_checked_before_an_escalation_is_refused_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    rita = make_user("rita", "reviewer", queues=("refunds",))
    request_ = escalating_gate(monkeypatch)
    valid = check_decision(request_, user=rita, decision="approve")  # her page, before the move

    do_expire_due(now=timezone.now() + timedelta(seconds=61))

    with pytest.raises(NotAllowed, match="leads"):
        do_decide(request_, reviewer=rita, valid=valid)
    assert_undecided_in_leads(request_)


@pytest.mark.django_db
def test_a_claim_checked_before_an_escalation_is_refused_after_it(monkeypatch: pytest.MonkeyPatch) -> None:
    rita = make_user("rita", "reviewer", queues=("refunds",))
    request_ = escalating_gate(monkeypatch)
    check_may_claim(request_, user=rita)

    do_expire_due(now=timezone.now() + timedelta(seconds=61))

    with pytest.raises(NotAllowed, match="leads"):
        do_claim(request_.pk, user=rita)
    request_.refresh_from_db()
    assert request_.claimed_by is None


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_a_decision_racing_an_escalation_is_refused_once_the_escalation_commits(
    monkeypatch: pytest.MonkeyPatch,
) -> None:
    rita = make_user("rita", "reviewer", queues=("refunds",))
    request_ = escalating_gate(monkeypatch)
    inside, go, reviewer_pid = threading.Event(), threading.Event(), {}
    notify_on_commit = expiry.notify.notify_on_commit

    def held_escalation(**kwargs: Any) -> None:
        # Inside the escalation's transaction: both rows locked, the move not committed.
        inside.set()
        assert go.wait(10)
        notify_on_commit(**kwargs)

    monkeypatch.setattr(expiry.notify, "notify_on_commit", held_escalation)
    escalation: dict[str, Any] = {}
    escalating = in_thread(lambda: do_expire_due(now=timezone.now() + timedelta(seconds=61)), escalation)
    assert inside.wait(10)

    def decide() -> ApprovalRequest:
        fresh = ApprovalRequest.objects.get(pk=request_.pk)  # still 'refunds': the move is not committed
        valid = check_decision(fresh, user=rita, decision="approve")
        reviewer_pid["pid"] = connection.connection.info.backend_pid
        return do_decide(fresh, reviewer=rita, valid=valid)

    decision: dict[str, Any] = {}
    deciding = in_thread(decide, decision)
    deadline = timezone.now() + timedelta(seconds=10)
    while not ("pid" in reviewer_pid and waiting_for_a_lock(reviewer_pid["pid"])):
        assert timezone.now() < deadline, "the decision never waited for the escalation's lock"
        threading.Event().wait(0.02)
    go.set()
    escalating.join(10)
    deciding.join(10)

    assert escalation == {"result": 1}
    assert isinstance(decision.get("error"), NotAllowed), decision
    assert_undecided_in_leads(request_)


def escalate_before(monkeypatch: pytest.MonkeyPatch, name: str) -> None:
    """The beat's escalation commits between the view's read of the request and its action."""
    from approvals.views import inbox as inbox_views

    real = getattr(inbox_views, name)

    def escalated_first(*args: Any, **kwargs: Any) -> Any:
        assert do_expire_due(now=timezone.now() + timedelta(seconds=61)) == 1
        return real(*args, **kwargs)

    monkeypatch.setattr(inbox_views, name, escalated_first)


@pytest.mark.django_db
@pytest.mark.parametrize(
    ("action", "path", "form", "headers"),
    [
        ("check_decision", "/approvals/{pk}/", {"decision": "approve"}, {}),
        ("check_decision", "/approvals/{pk}/", {"decision": "approve"}, {"HX-Request": "true"}),
        ("do_claim_op", "/approvals/{pk}/claim/", {"op": "claim"}, {}),
        (
            "do_claim_op",
            "/approvals/{pk}/claim/",
            {"op": "claim"},
            {"HX-Request": "true", "HX-Target": "row"},
        ),
    ],
)
def test_a_page_decision_or_claim_refused_by_an_escalation_meanwhile_says_why(
    monkeypatch: pytest.MonkeyPatch, action: str, path: str, form: dict[str, str], headers: dict[str, str]
) -> None:
    from django.test import Client

    rita = make_user("rita", "reviewer", queues=("refunds",))
    request_ = escalating_gate(monkeypatch)
    escalate_before(monkeypatch, action)
    page = Client(headers=headers)
    page.force_login(rita)

    response = page.post(path.format(pk=request_.pk), form)

    if headers:  # htmx: to the inbox, which says why (a 403 page would land inside the page)
        assert (response.status_code, response["HX-Redirect"]) == (200, "/")
        assert "requests in the &#x27;leads&#x27; queue" in page.get("/").content.decode()
    else:
        assert response.status_code == 403
        assert "leads" in response.content.decode()
    assert_undecided_in_leads(request_)
    assert ApprovalRequest.objects.get(pk=request_.pk).claimed_by is None
