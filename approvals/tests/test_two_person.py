"""The two-person rule: a request a policy requires N approvers for waits for N different ones."""

import json
import re
import threading
from typing import Any

import pytest
from django.db import connection
from django.test import Client

from agents import gates
from approvals.actions.claims import do_release
from approvals.actions.decisions import NotAllowed, check_decision, do_decide
from approvals.actions.errors import Conflict
from approvals.actions.policies import do_create_policy
from approvals.actions.signoffs import AlreadySignedOff, describe_signoffs
from approvals.actions.tokens import do_create_token
from approvals.actions.undo import do_undo
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent
from checkpoints.models import Thread, ThreadStatus
from tests.factories import make_gate, make_user


def require(approvers: int, groups: list[str] | None = None) -> None:
    do_create_policy(
        actor=None,
        fields={
            "name": "two people",
            "tool": "issue_refund",
            "when": "args.amount_cents > 100000",
            "action": "require",
            "approvers": approvers,
        },
        groups=groups,
    )


def big_refund() -> ApprovalRequest:
    return make_gate(args={"order_id": "ORD-1001", "amount_cents": 150000})


def decide(request_: ApprovalRequest, user: Any, decision: str = "approve", **kw: Any) -> ApprovalRequest:
    return do_decide(
        request_, reviewer=user, valid=check_decision(request_, user=user, decision=decision, **kw)
    )


def api_client(user: Any) -> Client:
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=user)}"})


def fresh(request_: ApprovalRequest) -> ApprovalRequest:
    return ApprovalRequest.objects.get(pk=request_.pk)


def thread_status(request_: ApprovalRequest) -> str:
    return Thread.objects.get(pk=request_.thread_id).status


@pytest.mark.django_db
def test_the_request_waits_for_two_different_reviewers() -> None:
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    require(2)
    request_ = big_refund()

    decide(request_, rita)

    assert fresh(request_).status == ApprovalStatus.PENDING
    assert describe_signoffs(fresh(request_)) == "1 of 2 approvals: rita"
    assert thread_status(request_) == ThreadStatus.WAITING

    decide(request_, sam)

    assert fresh(request_).status == ApprovalStatus.APPROVED
    assert fresh(request_).decided_by == sam
    assert thread_status(request_) == ThreadStatus.RUNNING
    assert AuditEvent.objects.filter(approval_ref=request_.pk, action="decision.signoff").count() == 2
    assert AuditEvent.objects.filter(approval_ref=request_.pk, action="decision.approve").count() == 1


@pytest.mark.django_db
def test_the_same_reviewer_cannot_approve_twice() -> None:
    rita = make_user("rita", "reviewer")
    require(2)
    request_ = big_refund()
    decide(request_, rita)

    with pytest.raises(AlreadySignedOff):
        decide(request_, rita)

    assert describe_signoffs(fresh(request_)) == "1 of 2 approvals: rita"


@pytest.mark.django_db
def test_one_rejection_rejects() -> None:
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    require(2)
    request_ = big_refund()
    decide(request_, rita)

    decide(request_, sam, "reject", message="Too much.")

    assert fresh(request_).status == ApprovalStatus.REJECTED
    assert thread_status(request_) == ThreadStatus.RUNNING


@pytest.mark.django_db
def test_an_edit_restarts_the_count_with_the_edited_arguments() -> None:
    rita, sam, tom = (make_user(n, "reviewer") for n in ("rita", "sam", "tom"))
    require(2)
    request_ = big_refund()
    decide(request_, rita)

    decide(request_, sam, "edit", args={"order_id": "ORD-1001", "amount_cents": 120000})

    assert describe_signoffs(fresh(request_)) == "1 of 2 approvals: sam"
    assert fresh(request_).status == ApprovalStatus.PENDING
    decide(fresh(request_), tom)  # tom reads the request as sam left it
    done = fresh(request_)
    assert (done.status, done.decision_args) == (
        ApprovalStatus.EDITED,
        {"order_id": "ORD-1001", "amount_cents": 120000},
    )


@pytest.mark.django_db
def test_the_gate_records_the_requirement_and_an_undo_restarts_the_count(settings: Any) -> None:
    settings.DECISION_UNDO_S = 30
    rita, sam, tom = (make_user(n, "reviewer") for n in ("rita", "sam", "tom"))
    require(2)
    request_ = big_refund()
    [required] = AuditEvent.objects.filter(approval_ref=request_.pk, action="policy.require")
    decide(request_, rita)
    decide(request_, sam)
    assert fresh(request_).status == ApprovalStatus.APPROVED

    do_undo(request_.pk, user=sam)

    # Back to pending with no approvals: rita's sign-off went with sam's undone approval.
    assert fresh(request_).status == ApprovalStatus.PENDING
    assert describe_signoffs(fresh(request_)) == "0 of 2 approvals"
    do_release(request_.pk, user=sam)  # the undo left it claimed by sam
    decide(request_, tom)
    assert fresh(request_).status == ApprovalStatus.PENDING
    assert (required.actor_name, required.data["policy"]["name"], required.data["required"]) == (
        "system",
        "two people",
        2,
    )


@pytest.mark.django_db
def test_approvers_must_come_from_the_policys_groups() -> None:
    rita = make_user("rita", "reviewer")
    sue = make_user("sue", "reviewer", queues=("supervisors",))
    require(1, groups=["supervisors-team"])
    request_ = big_refund()

    with pytest.raises(NotAllowed):
        decide(request_, rita)
    decide(request_, sue)

    assert fresh(request_).status == ApprovalStatus.APPROVED


@pytest.mark.django_db
def test_the_api_answers_200_with_the_approvals_so_far_while_it_waits() -> None:
    rita = make_user("rita", "reviewer")
    require(2)
    request_ = big_refund()
    client = Client(headers={"Authorization": f"Bearer {do_create_token(user=rita)}"})
    url = f"/api/approvals/{request_.pk}/decision"

    first = client.post(url, {"decision": "approve"}, content_type="application/json")
    again = client.post(url, {"decision": "approve"}, content_type="application/json")

    assert first.status_code == 200
    body = first.json()
    assert (body["status"], body["approvals"], body["required_approvals"]) == ("pending", ["rita"], 2)
    assert body["policy"] == "'two people' v1"
    assert again.status_code == 409
    assert "already approved" in again.json()["detail"]


@pytest.mark.postgres_only
@pytest.mark.django_db(transaction=True)
def test_n_concurrent_approvals_resume_the_thread_exactly_once(monkeypatch: pytest.MonkeyPatch) -> None:
    reviewers = [make_user(f"r{i}", "reviewer") for i in range(3)]
    require(3)
    request_ = big_refund()
    resumes: list[bool] = []
    real = gates.resume_if_decided

    def counted(**kw: Any) -> bool:
        resumes.append(real(**kw))
        return resumes[-1]

    monkeypatch.setattr(gates, "resume_if_decided", counted)
    barrier = threading.Barrier(len(reviewers))
    errors: list[Exception] = []

    def approve(user: Any) -> None:
        try:
            valid = check_decision(request_, user=user, decision="approve")
            barrier.wait()
            do_decide(request_, reviewer=user, valid=valid)
        except (Conflict, NotAllowed) as exc:
            errors.append(exc)
        finally:
            connection.close()

    workers = [threading.Thread(target=approve, args=(u,)) for u in reviewers]
    for w in workers:
        w.start()
    for w in workers:
        w.join()

    assert errors == []
    assert fresh(request_).status == ApprovalStatus.APPROVED
    assert fresh(request_).signoffs.count() == 3
    assert resumes == [True]
    assert thread_status(request_) == ThreadStatus.RUNNING


@pytest.mark.django_db
def test_pages_say_who_approved_so_far_and_what_a_policy_decided() -> None:
    from django.urls import reverse

    rita = make_user("rita", "reviewer")
    require(2)
    waiting = big_refund()
    decide(waiting, rita)
    do_create_policy(
        actor=None,
        fields={
            "name": "small refunds",
            "tool": "issue_refund",
            "when": "args.amount_cents < 5000",
            "action": "approve",
        },
    )
    auto = make_gate(args={"order_id": "ORD-1001", "amount_cents": 100})
    client = Client()
    client.force_login(rita)

    decision_page = client.get(reverse("approvals:decision", args=[waiting.pk])).content.decode()
    inbox = client.get(reverse("approvals:inbox")).content.decode()
    auto_page = client.get(reverse("approvals:decision", args=[auto.pk])).content.decode()
    thread_page = client.get(reverse("approvals:thread", args=[auto.thread_id])).content.decode()

    assert "1 of 2 approvals: rita (policy &#x27;two people&#x27; v1)" in decision_page
    assert "1 of 2 approvals: rita" in inbox
    assert "approved automatically by policy &#x27;small refunds&#x27; v1" in auto_page.replace(
        "Approved", "approved"
    )
    assert "automatically by policy &#x27;small refunds&#x27; v1" in thread_page


@pytest.mark.django_db
def test_the_conversation_says_how_many_approvals_a_pending_request_has_not_pending_automatically() -> None:
    do_create_policy(
        actor=None,
        fields={
            "name": "two people",
            "tool": "issue_refund",
            "when": "true",
            "action": "require",
            "approvers": 2,
        },
    )
    request_ = make_gate(args={"order_id": "ORD-1001", "amount_cents": 150000})
    rita = make_user("rita", "reviewer")
    do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))
    client = Client()
    client.force_login(make_user("bob", "reviewer"))

    page = client.get(f"/approvals/{request_.pk}/").content.decode()

    assert "pending automatically" not in page
    assert "pending · 1 of 2 approvals: rita" in page
    assert "It needs 2 different reviewers to approve" in page


@pytest.mark.django_db
@pytest.mark.parametrize("through", ["action", "page", "api"])
def test_an_approval_of_arguments_another_reviewer_edited_since_is_refused_not_counted(
    through: str, settings: Any
) -> None:
    settings.DECISION_UNDO_S = 0
    require(2)
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = big_refund()
    page = Client()
    page.force_login(rita)
    read_by_rita = fresh(request_)  # her page: $1,500.00, no edit yet
    mark = re.search(
        r'name="args_seen" value="(\w+)"', page.get(f"/approvals/{request_.pk}/").content.decode()
    )
    assert mark is not None

    decide(fresh(request_), sam, "edit", args={"order_id": "ORD-1001", "amount_cents": 999999})  # 1 of 2

    if through == "action":
        with pytest.raises(Conflict, match="edited after you opened"):
            do_decide(
                read_by_rita, reviewer=rita, valid=check_decision(read_by_rita, user=rita, decision="approve")
            )
    elif through == "page":
        answer = page.post(f"/approvals/{request_.pk}/", {"decision": "approve", "args_seen": mark[1]})
        assert answer.status_code == 409 and "edited after you opened" in answer.content.decode()
    else:  # the arguments her client read over the API
        body = {"decision": "approve", "approved_args": read_by_rita.effective_args}
        answer = api_client(rita).post(
            f"/api/approvals/{request_.pk}/decision", json.dumps(body), content_type="application/json"
        )
        assert answer.status_code == 409 and "edited after you opened" in answer.json()["detail"]
    # Her approval did not complete the rule for $9,999.99, which only sam has seen.
    assert (fresh(request_).status, describe_signoffs(fresh(request_))) == (
        "pending",
        "1 of 2 approvals: sam",
    )


@pytest.mark.django_db
def test_an_api_approval_of_the_arguments_as_they_stand_counts(settings: Any) -> None:
    settings.DECISION_UNDO_S = 0
    require(2)
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = big_refund()
    decide(fresh(request_), sam, "edit", args={"order_id": "ORD-1001", "amount_cents": 120000})

    body = {"decision": "approve", "approved_args": {"order_id": "ORD-1001", "amount_cents": 120000}}
    answer = api_client(rita).post(
        f"/api/approvals/{request_.pk}/decision", json.dumps(body), content_type="application/json"
    )

    assert answer.status_code == 200 and fresh(request_).status == "edited"  # approved as edited


@pytest.mark.django_db
def test_a_reviewer_who_approved_cannot_claim_the_request_from_the_reviewers_it_waits_for() -> None:
    from approvals.actions.claims import do_claim

    require(2)
    rita, sam = make_user("rita", "reviewer"), make_user("sam", "reviewer")
    request_ = big_refund()
    decide(request_, rita)  # 1 of 2

    with pytest.raises(Conflict, match="already approved"):
        do_claim(request_.pk, user=rita)
    assert do_claim(request_.pk, user=sam).claimed_by == sam


@pytest.mark.django_db
def test_an_api_approval_of_arguments_the_request_does_not_hold_is_refused_with_one_approver_too(
    settings: Any,
) -> None:
    # README, the decision row: approved_args are what the client read; a request needing one
    # approval ran its own arguments while the client had approved others (ORD-1003 for ORD-9999).
    settings.DECISION_UNDO_S = 0
    rita = make_user("rita", "reviewer")
    request_ = make_gate(args={"order_id": "ORD-1003", "amount_cents": 1999})

    body = {"decision": "approve", "approved_args": {"order_id": "ORD-9999", "amount_cents": 1}}
    answer = api_client(rita).post(
        f"/api/approvals/{request_.pk}/decision", json.dumps(body), content_type="application/json"
    )

    assert answer.status_code == 409 and "edited after you opened" in answer.json()["detail"]
    assert fresh(request_).status == ApprovalStatus.PENDING
    assert thread_status(request_) == ThreadStatus.WAITING

    body["approved_args"] = {"order_id": "ORD-1003", "amount_cents": 1999}
    answer = api_client(rita).post(
        f"/api/approvals/{request_.pk}/decision", json.dumps(body), content_type="application/json"
    )
    assert answer.status_code == 200 and fresh(request_).status == ApprovalStatus.APPROVED
