"""A thread started through the API under the id of a deleted thread is a new thread: the old
thread's standing approval neither survives the deletion nor decides its refund."""

from typing import Any

import pytest
from django.test import Client

from agents.examples.models import Refund
from approvals.actions.threads import do_delete_thread
from approvals.models import ApprovalRequest, ApprovalStatus, Policy
from tests.factories import api_for, make_gate, make_user
from tests.live import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


def test_a_thread_started_under_a_deleted_threads_id_waits_for_a_reviewer(
    live_server_url: str, celery_worker: Any
) -> None:
    rita = make_user("rita", "reviewer")
    ada = make_user("ada", "admin")
    gate = make_gate(thread_id="cust-42")
    page = Client()
    page.force_login(rita)
    answer = page.post(f"/approvals/{gate.pk}/", {"decision": "approve", "standing": "tool", "until": ""})
    assert answer.status_code == 302
    wait_for(lambda: Refund.objects.filter(thread_id="cust-42").exists(), timeout=30, message="first refund")
    wait_for(
        lambda: api_for(ada, live_server_url).thread("cust-42")["status"] == "done",
        timeout=30,
        message="done",
    )

    do_delete_thread("cust-42", user=ada)
    Refund.objects.all().delete()  # the example ledger: only what follows counts
    assert not Policy.objects.filter(thread_id="cust-42").exists()

    api = api_for(make_user("olga", "operator"), live_server_url)
    body = {"agent": "refunds", "input": "Please refund order ORD-1003", "thread_id": "cust-42"}
    assert api.post("/threads", body).status_code == 201
    wait_for(
        lambda: api.thread("cust-42")["status"] in ("waiting", "done", "failed"), timeout=40, message="gate"
    )

    assert api.thread("cust-42")["status"] == "waiting"
    request_ = ApprovalRequest.objects.get(thread_id="cust-42")
    assert (request_.status, request_.decided_by, request_.policy_name) == (ApprovalStatus.PENDING, None, "")
    assert not Refund.objects.filter(thread_id="cust-42").exists()
