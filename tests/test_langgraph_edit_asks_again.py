"""An edit that asks a pending gate again links the new request to the one it replaces and keeps
its place in the queue, for a LangGraph thread as for every agent (README, "The decision page is
the record of what was asked"): the interrupted node runs again and raises a fresh interrupt (a
new id, so a new gate key), which is the same gate when it asks about the same tool call."""

import dataclasses
from datetime import timedelta
from typing import Any

import pytest
from django.utils import timezone
from langgraph_sdk import get_sync_client

from agents import runtime
from agents.actions.control import do_update_state
from agents.actions.start import do_start_thread
from agents.registry import registry
from agents.tools import Expiry
from approvals.actions.expiry import do_expire_due
from approvals.models import ApprovalRequest, ApprovalStatus
from approvals.tests.helpers import steps_sent
from checkpoints.backends import get_backend
from checkpoints.models import ThreadStatus
from tests.factories import Api, api_for, make_user
from tests.live import wait_for
from tests.test_langgraph_flow import amount
from tests.test_refunds_flow import decide, gate, last_message, wait_status

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "refunds_langgraph"


@pytest.fixture
def api(live_server_url: str, celery_worker: Any) -> Api:
    return api_for(make_user("ada", "admin"), live_server_url)


def edit_over_the_api(api: Api, thread_id: str, cents: int) -> None:
    """PATCH /api/threads/{id}/state, as the console's state page saves."""
    with api._client() as client:
        values = api.thread(thread_id)["values"]
        response = client.patch(
            f"/threads/{thread_id}/state", json={"values": {"messages": amount(values, cents)}}
        )
    assert response.status_code == 200, response.text


def edit_with_langgraph_sdk(api: Api, thread_id: str, cents: int) -> None:
    """A LangGraph client's update_state with the edited AI message (langgraph_sdk)."""
    client = get_sync_client(url=f"{api.base_url}/langgraph", api_key=api.token)
    values: Any = client.threads.get_state(thread_id)["values"]
    message = dict(values["messages"][-1])
    message["tool_calls"][0]["args"]["amount_cents"] = cents
    client.threads.update_state(thread_id, {"messages": [message]})


def asked_again(api: Api, thread_id: str, *, after: dict[str, Any]) -> dict[str, Any]:
    """The thread's one pending request once it is not `after` any more."""

    def asked() -> dict[str, Any]:
        thread = api.thread(thread_id)
        pending = thread["pending_approvals"] if thread["status"] == "waiting" else []
        return next((a for a in pending if a["id"] != after["id"]), {})

    return wait_for(asked, timeout=20, message=f"thread {thread_id} to ask again")


@pytest.mark.parametrize("edit", [edit_over_the_api, edit_with_langgraph_sdk])
def test_an_edit_of_a_langgraph_gate_links_the_new_request_and_keeps_its_place(api: Api, edit: Any) -> None:
    thread_id, first = gate(api, AGENT, "Please refund order ORD-1001")
    _, later = gate(api, AGENT, "Please refund order ORD-1003")  # another thread, asked after

    edit(api, thread_id, 1000)
    second = asked_again(api, thread_id, after=first)
    edit(api, thread_id, 2000)  # and again: each request points at the one it replaced
    third = asked_again(api, thread_id, after=second)

    assert (second["args"]["amount_cents"], third["args"]["amount_cents"]) == (1000, 2000)
    assert (second["supersedes"], third["supersedes"]) == (first["id"], second["id"])
    rows = ApprovalRequest.objects.in_bulk([first["id"], second["id"], third["id"], later["id"]])
    assert rows[first["id"]].status == rows[second["id"]].status == ApprovalStatus.SUPERSEDED
    assert rows[third["id"]].created_at == rows[first["id"]].created_at < rows[later["id"]].created_at
    inbox = api.get("/approvals", queue="refunds").json()
    assert [a["id"] for a in inbox] == [third["id"], later["id"]]  # oldest first: the first's place
    # The linked request is decided as any other: the edited refund runs.
    decide(api, third, {"decision": "approve"})
    assert "Refund of $20.00 issued for order ORD-1001" in last_message(wait_status(api, thread_id, "done"))


def test_an_edit_that_removes_the_asked_call_links_nothing(api: Api) -> None:
    """Only the same call is the same gate: an edit that asks about another call is a new request."""
    thread_id, first = gate(api, AGENT, "Please refund order ORD-1001")
    values = api.thread(thread_id)["values"]
    [call] = values["messages"][-1]["tool_calls"]
    renamed = [
        {**m, "tool_calls": [{**call, "id": "call_replaced"}]} if m.get("tool_calls") else m
        for m in values["messages"]
    ]
    with api._client() as client:
        response = client.patch(f"/threads/{thread_id}/state", json={"values": {"messages": renamed}})
    assert response.status_code == 200, response.text

    second = asked_again(api, thread_id, after=first)
    assert second["supersedes"] is None
    assert ApprovalRequest.objects.get(pk=first["id"]).status == ApprovalStatus.SUPERSEDED


def run_until_still(thread_id: str) -> str:
    """Run the thread's steps in this process until it stops running; its status."""
    backend = get_backend()
    for _ in range(10):
        thread = backend.get_thread(thread_id=thread_id)
        if thread.status != ThreadStatus.RUNNING:
            return str(thread.status)
        runtime.run_step(thread_id=thread_id, checkpoint_id=thread.head_id or "", worker="w-test")
    raise AssertionError(f"thread {thread_id} still running")


def test_an_escalated_langgraph_gate_asked_again_after_an_edit_stays_escalated(
    live_server_url: str, monkeypatch: pytest.MonkeyPatch
) -> None:
    """In this process (the gate's expiry is patched here; the model is the live server's)."""
    steps_sent(monkeypatch)  # the steps run below, not in a worker
    agent: Any = registry.get(AGENT)
    escalating = Expiry(900, "escalate", to_queue="supervisors")
    approval = dataclasses.replace(agent.approval_for("issue_refund"), expiry=escalating)
    monkeypatch.setitem(agent.overrides, "issue_refund", approval)
    olga = make_user("olga", "operator")
    thread, _ = do_start_thread(
        agent=agent, text="Please refund order ORD-1001", thread_id=None, actor="olga"
    )
    assert run_until_still(thread.id) == "waiting"
    first = ApprovalRequest.objects.get(thread_id=thread.id)
    assert do_expire_due(now=timezone.now() + timedelta(seconds=901)) == 1

    values = get_backend().get(thread_id=thread.id).values
    do_update_state(thread.id, values={**values, "messages": amount(values, 1000)}, actor=olga.username)
    assert run_until_still(thread.id) == "waiting"

    again = ApprovalRequest.objects.get(thread_id=thread.id, status=ApprovalStatus.PENDING)
    assert (again.supersedes_id, again.args["amount_cents"]) == (first.pk, 1000)
    # Still with the supervisors, marked as escalated, not timed again for the refunds team.
    assert (again.queue, again.escalated_from, again.expires_at) == ("supervisors", "refunds", None)
    assert again.created_at == first.created_at
