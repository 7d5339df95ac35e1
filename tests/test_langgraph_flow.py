"""A LangGraph graph behind the inbox: the `refunds_langgraph` example over the HTTP API, with a
real Celery worker and the offline model reached through LangChain's OpenAI chat model."""

import json
from typing import Any

import pytest
from django.contrib.auth.models import User
from django.test import Client

from agents.examples.models import Refund
from agents.registry import registry
from approvals.models import ApprovalRequest
from tests.factories import Api, api_for, make_user
from tests.test_refunds_flow import (
    decide,
    gate,
    last_message,
    start,
    wait_status,
)

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "refunds_langgraph"


@pytest.fixture
def api(live_server_url: str, celery_worker: Any) -> Api:
    return api_for(make_user("ada", "admin"), live_server_url)


def test_approve_resumes_the_graph_runs_the_tool_once_and_finishes(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")
    assert (approval["action"], approval["queue"]) == ("issue_refund", "refunds")
    assert approval["args"] == {"order_id": "ORD-1001", "amount_cents": 4250}
    assert approval["allowed_decisions"] == ["approve", "edit", "reject"]  # the interrupt's review_config
    schema = registry.get(AGENT).edit_schema("issue_refund")  # the edit form's, from the LangChain tool
    assert set(schema["properties"]) == {"order_id", "amount_cents"}  # the injected call id is not asked
    assert Refund.objects.count() == 0

    decide(api, approval, {"decision": "approve"})

    done = wait_status(api, thread_id, "done")
    assert "Refund of $42.50 issued for order ORD-1001" in last_message(done)
    [refund] = Refund.objects.all()
    assert (refund.order_id, refund.amount_cents, refund.thread_id) == ("ORD-1001", 4250, thread_id)
    [call_id] = [
        c["id"]
        for m in done["values"]["messages"]
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == "issue_refund"
    ]
    assert refund.idempotency_key.endswith(f":{call_id}")  # the model's call id: stable across retries
    assert done["values"]["langgraph_checkpoint"]  # where LangGraph's own checkpoints stand
    assert done["values"]["interrupts"] == []


def test_respond_is_not_offered_where_the_interrupt_does_not_allow_it(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")

    response = api.post(f"/approvals/{approval['id']}/decision", {"decision": "respond", "message": "no"})

    assert response.status_code == 400, response.text
    assert "respond" in response.json()["errors"]["decision"]
    assert api.thread(thread_id)["status"] == "waiting"


def test_an_exported_waiting_thread_imports_with_its_gate_asked_afresh_and_runs_on(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1002")
    document = api.get(f"/threads/{thread_id}/export").json()

    response = api.post("/imports?thread_id=lg-copy-1", document)

    assert response.status_code == 201, response.text
    [asked] = wait_status(api, "lg-copy-1", "waiting")["pending_approvals"]
    assert (asked["action"], asked["args"]) == ("issue_refund", approval["args"])
    decide(api, asked, {"decision": "approve"})
    done = wait_status(api, "lg-copy-1", "done")
    assert "Refund of $129.99 issued for order ORD-1002" in last_message(done)
    assert list(Refund.objects.values_list("thread_id", flat=True)) == ["lg-copy-1"]


def amount(values: dict[str, Any], cents: int) -> list[dict[str, Any]]:
    """The conversation with the proposed refund's amount changed (the call's JSON arguments)."""
    return [
        {
            **m,
            "tool_calls": [
                {
                    **c,
                    "function": {
                        **c["function"],
                        "arguments": json.dumps(
                            {**json.loads(c["function"]["arguments"]), "amount_cents": cents}
                        ),
                    },
                }
                for c in m["tool_calls"]
            ],
        }
        if any(c["function"]["name"] == "issue_refund" for c in m.get("tool_calls") or [])
        else m
        for m in values["messages"]
    ]


def test_an_operator_edits_the_proposed_refund_and_langgraph_asks_again_about_the_edit(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")
    head = api.thread(thread_id)["values"]
    with api._client() as client:
        moved = client.patch(f"/threads/{thread_id}/state", json={"values": {"langgraph_checkpoint": "x"}})
        assert moved.status_code == 400, moved.text
        assert "only messages can be edited" in moved.json()["errors"]["langgraph_checkpoint"]
        assert api.thread(thread_id)["values"] == head  # nothing changed

        response = client.patch(
            f"/threads/{thread_id}/state", json={"values": {"messages": amount(head, 1000)}}
        )
    assert response.status_code == 200, response.text

    # LangGraph's own update_state: the interrupted node runs again on the edited call and asks anew.
    [asked] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert asked["args"] == {"order_id": "ORD-1001", "amount_cents": 1000} and asked["id"] != approval["id"]
    assert ApprovalRequest.objects.get(pk=approval["id"]).status == "superseded"
    values = api.thread(thread_id)["values"]
    assert values["langgraph_checkpoint"] != head["langgraph_checkpoint"]
    assert len(values["messages"]) == len(head["messages"])  # the call replaced, not appended
    decide(api, asked, {"decision": "approve"})
    done = wait_status(api, thread_id, "done")
    assert "Refund of $10.00 issued for order ORD-1001" in last_message(done)
    assert list(Refund.objects.values_list("amount_cents", flat=True)) == [1000]


def test_an_operator_forks_a_langgraph_thread_from_its_gate(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")
    decide(api, approval, {"decision": "approve"})
    wait_status(api, thread_id, "done")

    # Time travel: back to the gate's checkpoint; LangGraph resumes from its own checkpoint there.
    page = Client()
    page.force_login(User.objects.get(username="ada"))
    form = page.get(f"/threads/{thread_id}/checkpoints/{approval['checkpoint_id']}/")
    assert "a node stopped at an interrupt re-runs from its start" in form.content.decode()
    forked = api.post(f"/threads/{thread_id}/fork", {"checkpoint_id": approval["checkpoint_id"]})

    assert forked.status_code == 200, forked.text
    [asked] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert asked["args"] == approval["args"] and asked["id"] != approval["id"]
    decide(api, asked, {"decision": "reject", "message": "Already refunded on the first branch"})
    done = wait_status(api, thread_id, "done")
    assert "Already refunded on the first branch" in last_message(done)
    assert list(Refund.objects.values_list("order_id", flat=True)) == ["ORD-1001"]


def test_a_fork_with_an_edited_call_branches_langgraph_from_that_step(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")
    decide(api, approval, {"decision": "reject", "message": "Not the whole order"})
    wait_status(api, thread_id, "done")
    origin = api.get(f"/threads/{thread_id}/checkpoints/{approval['checkpoint_id']}").json()["values"]

    forked = api.post(
        f"/threads/{thread_id}/fork",
        {"checkpoint_id": approval["checkpoint_id"], "values": {**origin, "messages": amount(origin, 500)}},
    )

    assert forked.status_code == 200, forked.text
    [asked] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert asked["args"] == {"order_id": "ORD-1001", "amount_cents": 500}
    decide(api, asked, {"decision": "approve"})
    assert "Refund of $5.00 issued" in last_message(wait_status(api, thread_id, "done"))


def test_a_fork_from_the_start_with_another_question_asks_about_that_order(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")
    [start] = [c for c in api.get(f"/threads/{thread_id}/history").json() if c["step"] == 0]
    origin = api.get(f"/threads/{thread_id}/checkpoints/{start['id']}").json()["values"]
    question = [{**m, "content": "Please refund order ORD-1003"} for m in origin["messages"]]

    forked = api.post(
        f"/threads/{thread_id}/fork",
        {"checkpoint_id": start["id"], "values": {**origin, "messages": question}},
    )

    assert forked.status_code == 200, forked.text
    [asked] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert asked["args"]["order_id"] == "ORD-1003"
    assert ApprovalRequest.objects.get(pk=approval["id"]).status == "superseded"


def test_two_actions_in_one_interrupt_are_two_requests_decided_in_any_order(api: Api) -> None:
    thread_id = start(api, "Please refund orders ORD-1001 and ORD-1003", agent=AGENT)
    first, second = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert {first["args"]["order_id"], second["args"]["order_id"]} == {"ORD-1001", "ORD-1003"}

    decide(api, second, {"decision": "reject", "message": "already refunded"})
    assert api.thread(thread_id)["status"] == "waiting"
    decide(api, first, {"decision": "approve"})

    done = wait_status(api, thread_id, "done")
    assert list(Refund.objects.values_list("order_id", flat=True)) == [first["args"]["order_id"]]
    assert "already refunded" in last_message(done)
