"""A thread whose agent is no longer registered (renamed or removed in a deploy): every page and
API read still answers, and what would run it on is refused with a clear 4xx, never a 500."""

import json
from html import escape
from typing import Any

import pytest
from django.test import Client

from approvals.actions.tokens import do_create_token
from approvals.models import ApprovalRequest, ApprovalStatus
from checkpoints.models import Thread
from tests.factories import make_gate, make_user

pytestmark = pytest.mark.django_db

RETIRED = "Cannot fork this thread: its agent 'retired' is not registered in this deployment."


@pytest.fixture
def retired() -> ApprovalRequest:
    request_ = make_gate()
    Thread.objects.filter(pk=request_.thread_id).update(agent="retired")
    ApprovalRequest.objects.filter(pk=request_.pk).update(agent="retired")
    return request_


@pytest.fixture
def admin() -> Any:
    return make_user("ada", "admin")


def test_its_pages_and_api_reads_still_answer(retired: ApprovalRequest, admin: Any) -> None:
    web = Client()
    web.force_login(admin)
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=admin)}"})
    thread, checkpoint = retired.thread_id, retired.checkpoint_id

    for path in (
        f"/approvals/{retired.pk}/",
        f"/threads/{thread}/",
        f"/threads/{thread}/state/",
        f"/threads/{thread}/checkpoints/{checkpoint}/",  # the fork dialog
        f"/threads/{thread}/diff/",
    ):
        assert web.get(path).status_code == 200, path
    for path in (f"/api/threads/{thread}", f"/api/threads/{thread}/checkpoints/{checkpoint}"):
        assert api.get(path).status_code == 200, path


def test_a_fork_an_edit_of_its_state_or_of_a_calls_arguments_is_refused_clearly(
    retired: ApprovalRequest, admin: Any
) -> None:
    web = Client()
    web.force_login(admin)
    api = Client(headers={"Authorization": f"Bearer {do_create_token(user=admin)}"})
    thread, checkpoint = retired.thread_id, str(retired.checkpoint_id)

    fork = api.post(
        f"/api/threads/{thread}/fork", {"checkpoint_id": checkpoint}, content_type="application/json"
    )
    assert (fork.status_code, fork.json()["detail"]) == (409, RETIRED)
    page = web.post(f"/threads/{thread}/checkpoints/{checkpoint}/", {"confirm": "1"})
    assert page.status_code == 409 and escape(RETIRED) in page.content.decode()
    preview = web.post(f"/threads/{thread}/checkpoints/{checkpoint}/")  # "Review the fork…"
    assert preview.status_code == 409 and escape(RETIRED) in preview.content.decode()
    edit = web.post(f"/threads/{thread}/state/", {"values": json.dumps({"messages": []})})
    refused = escape("its agent 'retired' is not registered")
    assert edit.status_code == 409 and refused in edit.content.decode()
    args = json.dumps({"order_id": "ORD-1001", "amount_cents": 100})
    decision = web.post(f"/approvals/{retired.pk}/", {"decision": "edit", "args": args})
    assert decision.status_code == 400 and "is not registered in this deployment" in decision.content.decode()

    retired.refresh_from_db()
    assert retired.status == ApprovalStatus.PENDING
    assert Thread.objects.get(pk=thread).head_id == retired.checkpoint_id  # nothing changed
