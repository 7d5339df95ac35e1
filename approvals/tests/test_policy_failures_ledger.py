"""A policy that cannot be evaluated on a call is on the record: a `policy.failed` event in the
hash-chained ledger, by system, linked to the request and naming the policy, its version and
what went wrong; written in the gate's transaction (nothing if it rolls back), readable on the
ledger page, and written again for a gate an import asks afresh."""

from typing import Any

import pytest
from django.db import transaction
from django.test import Client

from approvals.actions.decisions import check_decision, do_decide
from approvals.actions.ledger import verify_ledger
from approvals.actions.policies import do_create_policy, do_delete_policy, do_update_policy
from approvals.actions.policy_gates import POLICY_FAILED
from approvals.actions.tokens import do_create_token
from approvals.actions.transfer import check_import, do_import_thread, export_thread
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent, Policy
from checkpoints.models import Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

MISSING = "args.currency == 'EUR'"


def policy(name: str, when: str, action: str, **fields: Any) -> Policy:
    return do_create_policy(
        actor=None,
        fields={"name": name, "tool": "issue_refund", "when": when, "action": action, **fields},
        groups=None,
    )


def refund(cents: int = 100) -> ApprovalRequest:
    return make_gate(args={"order_id": "ORD-1001", "amount_cents": cents})


def failures() -> list[AuditEvent]:
    return list(AuditEvent.objects.filter(action=POLICY_FAILED).order_by("id"))


def test_a_policy_that_cannot_be_evaluated_is_a_ledger_event_naming_the_request_and_policy() -> None:
    euro = policy("euro only", MISSING, "deny", order=1)
    policy("small refunds", "args.amount_cents < 5000", "approve", order=2)

    request_ = refund()

    assert request_.status == ApprovalStatus.PENDING
    [event] = failures()
    assert (event.actor_name, event.actor_id, event.approval_ref, event.approval_id) == (
        "system",
        None,
        request_.pk,
        request_.pk,
    )
    assert (event.thread_id, event.checkpoint_id) == (request_.thread_id, str(request_.checkpoint_id))
    assert event.data["policy"] == {"id": euro.pk, "name": "euro only", "version": 1}
    assert "args.currency is missing" in event.data["error"]
    # What the reviewer is shown, as every event on a request records it.
    assert (event.data["action"], event.data["queue"]) == ("issue_refund", request_.queue)
    assert event.data["args_seen"] == {"order_id": "ORD-1001", "amount_cents": 100}
    assert verify_ledger().ok


def test_the_event_names_the_version_that_failed() -> None:
    euro = policy("euro only", "args.amount_cents > 100000", "deny")
    assert refund().status == ApprovalStatus.PENDING and not failures()  # it evaluates: no event

    do_update_policy(euro.pk, actor=None, fields={"when": MISSING})
    refund()

    [event] = failures()
    assert event.data["policy"] == {"id": euro.pk, "name": "euro only", "version": 2}


def test_a_gate_that_rolls_back_leaves_no_event() -> None:
    policy("euro only", MISSING, "deny")
    before = AuditEvent.objects.count()

    with pytest.raises(RuntimeError), transaction.atomic():
        refund()
        assert len(failures()) == 1  # written with the gate ...
        raise RuntimeError("the step's commit fails")

    assert not failures() and AuditEvent.objects.count() == before  # ... and gone with it
    assert not ApprovalRequest.objects.exists()
    assert verify_ledger().ok


def test_the_ledger_page_shows_the_failure_readably_with_links() -> None:
    euro = policy("euro only", MISSING, "deny")
    request_ = refund()
    admin = Client()
    admin.force_login(make_user("ada", "admin"))

    page = admin.get("/ledger/", {"action": "policy.failed"}).content.decode()

    assert ">policy.failed<" in page
    assert "&#x27;euro only&#x27; v1" in page  # the policy fact: name and version
    assert "args.currency is missing: the call has no argument &#x27;currency&#x27;" in page
    assert f'<a href="/approvals/{request_.pk}/">request {request_.pk}</a>' in page
    assert f'href="/admin/approvals/policy/{euro.pk}/change/"' in page
    # A deleted policy's entry keeps its name and version, with no link leading nowhere.
    do_delete_policy(euro.pk, actor=None)
    page = admin.get("/ledger/", {"action": "policy.failed"}).content.decode()
    assert "&#x27;euro only&#x27; v1" in page
    assert f"/admin/approvals/policy/{euro.pk}/change/" not in page


def test_the_ledger_csv_carries_the_failure() -> None:
    policy("euro only", MISSING, "deny")
    refund()
    admin = Client()
    admin.force_login(make_user("ada", "admin"))

    exported = admin.get("/ledger.csv", {"action": "policy.failed"})
    text = b"".join(exported.streaming_content).decode()  # type: ignore[attr-defined]

    assert "policy.failed" in text and "euro only" in text and "args.currency is missing" in text


def test_a_preview_writes_no_event() -> None:
    refund()
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=make_user('ada', 'admin'))}"})
    body = {"name": "euro only", "tool": "issue_refund", "when": MISSING, "action": "deny"}

    shown = api.post("/api/policies/preview", body, content_type="application/json").json()

    assert shown["counts"] == {"to a person": 1}
    assert not failures()


def test_an_imported_threads_gate_asked_afresh_records_the_failure_here() -> None:
    policy("euro only", MISSING, "deny")
    original = refund()
    document = export_thread(Thread.objects.get(pk=original.thread_id))
    assert "policy.failed" not in str(document)  # the ledger does not travel with a thread

    do_import_thread(check_import(document, thread_id="refund-copy"), user=None)

    asked = ApprovalRequest.objects.get(thread_id="refund-copy")
    assert [(e.thread_id, e.approval_ref) for e in failures()] == [
        (original.thread_id, original.pk),
        ("refund-copy", asked.pk),
    ]
    assert verify_ledger().ok


def test_the_decision_page_still_says_why_a_person_decided_once_one_has() -> None:
    policy("euro only", MISSING, "deny")
    request_ = refund()
    rita = make_user("rita", "reviewer")
    do_decide(request_, reviewer=rita, valid=check_decision(request_, user=rita, decision="approve"))

    client = Client()
    client.force_login(rita)
    page = client.get(f"/approvals/{request_.pk}/").content.decode()

    assert "Left to a person: policy" in page and "euro only" in page
