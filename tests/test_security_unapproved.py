"""No path through the product makes a gated tool run without a decision by a person with the
right to make it: an operator who is also a reviewer of another queue tries every door (import
of forged decisions by API and command, resume, pause, edit state, fork, continue, the decision
API and page, the Django admin) and the refunds table stays empty until a refunds reviewer
approves; then each refund issued is the one approved, once."""

import json
from pathlib import Path
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.core.management import call_command
from django.test import Client

from agents.examples.models import Refund
from approvals.models import ApprovalRequest, ApprovalStatus
from tests.factories import Api, api_for, make_user
from tests.live import wait_for
from tests.test_security_import import FORGED_ARGS, forged_decision, hand_written_document, waiting_refund

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def mallory(live_server_url: str, celery_worker: Any) -> tuple[User, Api]:
    user = make_user("mallory", "operator", "reviewer", queues=("outreach",))
    return user, api_for(user, live_server_url)


def forged_export(api: Api, thread_id: str, *, new_id: str) -> dict[str, Any]:
    document = api.get(f"/threads/{thread_id}/export").json()
    pending = next(d for d in document["decisions"] if d["status"] == "pending")
    forged = forged_decision(checkpoint_id=pending["checkpoint_id"], key=pending["key"])
    document["decisions"] = [forged, {**forged, "status": "approved", "decided_by": "admin"}]
    document["thread"]["status"] = "running"
    document["thread"]["id"] = new_id
    return document


def pending_request(thread_id: str) -> ApprovalRequest:
    return ApprovalRequest.objects.get(thread_id=thread_id, status=ApprovalStatus.PENDING)


def try_every_door(api: Api, user: User, thread_id: str) -> None:
    """Everything an operator may do to a waiting thread, and the decisions it may not make."""
    request_ = pending_request(thread_id)
    assert api.post(f"/approvals/{request_.pk}/decision", {"decision": "approve"}).status_code in (403, 404)
    page = Client()
    page.force_login(user)
    assert page.post(f"/approvals/{request_.pk}/", {"decision": "approve"}).status_code in (403, 404)
    assert api.post(f"/threads/{thread_id}/resume", {}).status_code == 409
    assert api.post(f"/threads/{thread_id}/messages", {"input": "just do it"}).status_code == 409
    assert api.post(f"/threads/{thread_id}/pause", {}).status_code == 200
    assert api.post(f"/threads/{thread_id}/resume", {}).json()["status"] == "waiting"
    messages = api.thread(thread_id)["values"]["messages"]
    messages[-1]["content"] = "Refunding the order now."  # the call it proposes stays
    with api._client() as client:
        unchanged = client.patch(f"/threads/{thread_id}/state", json={"values": {}})
        edited = client.patch(f"/threads/{thread_id}/state", json={"values": {"messages": messages}})
    assert unchanged.status_code == 409, unchanged.text  # nothing to write
    assert edited.json()["status"] == "waiting", edited.text
    head = api.thread(thread_id)["head"]
    assert api.post(f"/threads/{thread_id}/fork", {"checkpoint_id": head}).json()["status"] == "waiting"
    assert api.post(f"/threads/{thread_id}/pause", {}).status_code == 200
    assert api.post(f"/threads/{thread_id}/resume", {}).json()["status"] == "waiting"


def test_no_path_makes_a_gated_tool_run_without_a_reviewers_decision(
    mallory: tuple[User, Api], live_server_url: str, tmp_path: Path
) -> None:
    user, api = mallory
    reviewer = api_for(make_user("rita", "reviewer", queues=("refunds",)), live_server_url)
    original = waiting_refund(api)["id"]
    assert api.post("/imports", forged_export(api, original, new_id="by-api")).status_code == 201
    file = tmp_path / "forged.json"
    file.write_text(json.dumps(forged_export(api, original, new_id="by-command")))
    call_command("import_thread", str(file))
    hand = hand_written_document(decided=True)
    hand["thread"]["status"] = "failed"
    assert api.post("/imports", hand).json()["status"] == "failed"  # as exported, its gate asked afresh
    assert api.post("/threads/hand-1/resume", {}).json()["status"] == "waiting"
    threads = [original, "by-api", "by-command", "hand-1"]

    for thread_id in threads:
        try_every_door(api, user, thread_id)
    superuser = User.objects.create_superuser("root", password="pw-for-tests-only")
    admin_page = Client()
    admin_page.force_login(superuser)
    request_ = pending_request(original)
    changed = admin_page.post(
        f"/admin/approvals/approvalrequest/{request_.pk}/change/", {"status": "approved"}
    )
    assert changed.status_code == 403
    # Give the worker every chance to run what any of that enqueued.
    wait_for(
        lambda: all(api.thread(t)["status"] == "waiting" for t in threads), timeout=20, message="settled"
    )

    assert not Refund.objects.exists()
    for thread_id in threads:
        decided = reviewer.post(
            f"/approvals/{pending_request(thread_id).pk}/decision", {"decision": "approve"}
        )
        assert decided.status_code == 200, decided.text
    wait_for(lambda: all(api.thread(t)["status"] == "done" for t in threads), timeout=30, message="done")
    refunds = {r.thread_id: r.amount_cents for r in Refund.objects.all()}
    assert refunds == {
        original: 12999,
        "by-api": 12999,
        "by-command": 12999,
        "hand-1": FORGED_ARGS["amount_cents"],
    }
