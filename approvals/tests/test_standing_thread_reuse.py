"""A standing decision covers only the thread it was made on: deleting the thread deletes it,
and one left from a deleted thread never decides for a newer thread started under the same id
(through the API, an import or a store-level delete)."""

from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from approvals.actions.threads import do_delete_thread
from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus, AuditEvent, Policy
from checkpoints.backends import get_backend
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

THREAD = "cust-42"


def stand_on(thread_id: str) -> Policy:
    """A reviewer approves the refund on the thread for the rest of the thread."""
    page = Client()
    page.force_login(User.objects.filter(username="rita").first() or make_user("rita", "reviewer"))
    gate = make_gate(thread_id=thread_id)
    answer = page.post(f"/approvals/{gate.pk}/", {"decision": "approve", "standing": "tool", "until": ""})
    assert answer.status_code == 302
    return Policy.objects.get(thread_id=thread_id)


def api_client(user: Any) -> Client:
    return Client(headers={"Authorization": f"Bearer {do_create_token(user=user, name='tests')}"})


def test_deleting_a_thread_deletes_its_standing_decisions_and_the_ledger_says_so() -> None:
    standing = stand_on(THREAD)
    kept = stand_on("cust-43").pk  # another thread's stays
    ada = make_user("ada", "admin")

    do_delete_thread(THREAD, user=ada)

    assert list(Policy.objects.values_list("pk", flat=True)) == [kept]
    deleted = AuditEvent.objects.get(action="policy.delete")
    assert (deleted.actor_name, deleted.thread_id, deleted.data["policy"]["id"]) == (
        "ada",
        THREAD,
        standing.pk,
    )
    assert AuditEvent.objects.get(action="thread.delete").data["standing_decisions"] == [standing.pk]


def test_an_import_under_a_deleted_threads_id_goes_to_a_person() -> None:
    stand_on(THREAD)
    ada = make_user("ada", "admin")
    other = make_gate(args={"order_id": "ORD-1003", "amount_cents": 9900})  # waiting at its refund
    api = api_client(make_user("olga", "operator"))
    document = api.get(f"/api/threads/{other.thread_id}/export").json()
    do_delete_thread(THREAD, user=ada)

    answer = api.post(f"/api/imports?thread_id={THREAD}", document, content_type="application/json")

    assert answer.status_code == 201, answer.content
    request_ = ApprovalRequest.objects.get(thread_id=THREAD, status=ApprovalStatus.PENDING)
    assert (request_.decided_by, request_.policy_name) == (None, "")


def test_a_standing_decision_left_by_a_deleted_thread_does_not_decide_for_a_new_one() -> None:
    """Left behind as deletions before they removed them did, or by a delete in the store."""
    standing = stand_on(THREAD)
    get_backend().delete_thread(thread_id=THREAD)
    assert Policy.objects.filter(pk=standing.pk).exists()

    again = make_gate(thread_id=THREAD, args={"order_id": "ORD-1003", "amount_cents": 9900})

    assert (again.status, again.decided_by, again.policy_id) == (ApprovalStatus.PENDING, None, None)
