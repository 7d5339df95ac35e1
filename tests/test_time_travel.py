"""Time travel over the API against a real worker: fork replays need fresh approval, a paused
thread holds, and a finished conversation continues from its head."""

from typing import Any

import pytest

from agents.examples.models import Refund
from tests.factories import Api, api_for, make_user
from tests.live import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api(live_server_url: str, celery_worker: Any) -> Api:
    return api_for(make_user("ada", "admin"), live_server_url)


def wait_status(api: Api, thread_id: str, status: str) -> dict[str, Any]:
    return wait_for(
        lambda: (t := api.thread(thread_id))["status"] == status and t,
        timeout=20,
        message=f"thread {thread_id} to be {status}",
    )


def approve_all(api: Api, thread: dict[str, Any]) -> None:
    for approval in thread["pending_approvals"]:
        response = api.post(f"/approvals/{approval['id']}/decision", {"decision": "approve"})
        assert response.status_code == 200, response.text


def refund_to_done(api: Api, text: str) -> str:
    response = api.post("/threads", {"agent": "refunds", "input": text})
    thread_id = response.json()["id"]
    approve_all(api, wait_status(api, thread_id, "waiting"))
    wait_status(api, thread_id, "done")
    return thread_id


def test_a_fork_before_the_refund_asks_for_approval_again_and_keeps_the_old_branch(api: Api) -> None:
    thread_id = refund_to_done(api, "Please refund order ORD-1001")
    history = api.get(f"/threads/{thread_id}/history").json()
    before_refund = next(c for c in history if c["step"] == 2)  # after the lookup, before the proposal

    response = api.post(f"/threads/{thread_id}/fork", {"checkpoint_id": before_refund["id"]})

    assert response.status_code == 200, response.text
    forked = wait_status(api, thread_id, "waiting")
    [approval] = forked["pending_approvals"]
    assert approval["action"] == "issue_refund"
    approve_all(api, forked)
    wait_status(api, thread_id, "done")
    assert Refund.objects.count() == 2  # the replay ran the side effect again, after a fresh approval
    after = api.get(f"/threads/{thread_id}/history").json()
    assert len(after) == len(history) + 4  # fork, gate, resume, answer
    assert {c["source"] for c in after} >= {"fork", "resume"}


def test_a_fork_with_an_edited_state_runs_the_edited_conversation(api: Api) -> None:
    thread_id = refund_to_done(api, "Please refund order ORD-1001")
    first = api.get(f"/threads/{thread_id}/history").json()[-1]
    values = api.get(f"/threads/{thread_id}/checkpoints/{first['id']}").json()["values"]
    values["messages"][0]["content"] = "Please refund order ORD-1003"

    api.post(f"/threads/{thread_id}/fork", {"checkpoint_id": first["id"], "values": values})

    [approval] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert approval["args"] == {"order_id": "ORD-1003", "amount_cents": 1999}
    diff = api.get(f"/threads/{thread_id}/diff", **{"from": first["id"]}).json()
    assert ("changed", "messages[0].content") in [(c["kind"], c["path"]) for c in diff]


def test_a_paused_waiting_thread_does_not_resume_on_decision_until_an_operator_resumes(api: Api) -> None:
    thread_id = api.post("/threads", {"agent": "refunds", "input": "Please refund order ORD-1002"}).json()[
        "id"
    ]
    waiting = wait_status(api, thread_id, "waiting")
    assert api.post(f"/threads/{thread_id}/pause", {}).json()["status"] == "paused"

    approve_all(api, waiting)

    assert api.thread(thread_id)["status"] == "paused"
    assert Refund.objects.count() == 0
    assert api.post(f"/threads/{thread_id}/resume", {}).json()["status"] == "running"
    wait_status(api, thread_id, "done")
    assert Refund.objects.count() == 1


def test_a_new_message_continues_a_finished_thread_from_its_head(api: Api) -> None:
    thread_id = refund_to_done(api, "Please refund order ORD-1001")

    response = api.post(f"/threads/{thread_id}/messages", {"input": "Now refund order ORD-1003 too"})

    assert response.status_code == 200, response.text
    [approval] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert approval["args"]["order_id"] == "ORD-1003"
    messages = api.thread(thread_id)["values"]["messages"]
    assert messages[0]["content"] == "Please refund order ORD-1001"  # the memory is kept


def test_cancel_withdraws_the_open_approval_and_a_late_decision_gets_409(api: Api) -> None:
    thread_id = api.post("/threads", {"agent": "refunds", "input": "Please refund order ORD-1004"}).json()[
        "id"
    ]
    [approval] = wait_status(api, thread_id, "waiting")["pending_approvals"]

    assert api.post(f"/threads/{thread_id}/cancel", {}).json()["status"] == "cancelled"
    late = api.post(f"/approvals/{approval['id']}/decision", {"decision": "approve"})

    assert late.status_code == 409
    assert late.json()["detail"] == "This request is no longer current: the thread was cancelled by ada."
    assert Refund.objects.count() == 0
