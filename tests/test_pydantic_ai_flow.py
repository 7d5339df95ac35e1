"""A pydantic-ai agent behind the inbox: the `refunds_pydantic_ai` example over the HTTP API,
with a real Celery worker and the offline model reached through pydantic-ai's OpenAI client."""

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
    wait_status,
)

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "refunds_pydantic_ai"


@pytest.fixture
def api(live_server_url: str, celery_worker: Any) -> Api:
    return api_for(make_user("ada", "admin"), live_server_url)


def test_approve_runs_the_tool_once_through_pydantic_ai_and_finishes(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")
    assert (approval["action"], approval["queue"]) == ("issue_refund", "refunds")
    assert approval["args"] == {"order_id": "ORD-1001", "amount_cents": 4250}
    schema = registry.get(AGENT).edit_schema("issue_refund")  # the edit form's, from pydantic-ai
    assert schema["properties"]["amount_cents"] == {
        "description": "Amount in cents",
        "exclusiveMinimum": 0,
        "maximum": 1000000,
        "type": "integer",
    }
    assert Refund.objects.count() == 0

    decide(api, approval, {"decision": "approve"})

    done = wait_status(api, thread_id, "done")
    assert "Refund of $42.50 issued for order ORD-1001" in last_message(done)
    [refund] = Refund.objects.all()
    assert (refund.order_id, refund.amount_cents, refund.thread_id) == ("ORD-1001", 4250, thread_id)
    assert refund.idempotency_key.endswith(ApprovalRequest.objects.get(pk=approval["id"]).key)
    assert done["values"]["history_format"] == "pydantic-ai/1"
    kinds = [m["kind"] for m in done["values"]["history"]]
    assert kinds[-1] == "response" and kinds.count("response") == 3  # lookup, propose, report


def test_an_operator_edits_the_proposed_refund_in_pydantic_ais_history_and_is_asked_again(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")
    head = api.thread(thread_id)["values"]
    page = Client()
    page.force_login(User.objects.get(username="ada"))
    form = page.get(f"/threads/{thread_id}/state/").content.decode()
    assert "edit history, pydantic-ai&#x27;s own messages, which the model reads" in form  # the form says so
    with api._client() as client:
        shown = [
            {**m, "content": "Refund ORD-1001 now"} if m["role"] == "user" else m for m in head["messages"]
        ]
        refused = client.patch(f"/threads/{thread_id}/state", json={"values": {"messages": shown}})
        assert refused.status_code == 400, refused.text
        assert "edit history" in refused.json()["errors"]["messages"]
        broken = client.patch(f"/threads/{thread_id}/state", json={"values": {"history": [{"kind": "chat"}]}})
        assert broken.status_code == 400, broken.text
        assert "is not pydantic-ai's message history" in broken.json()["errors"]["history"]
        history = json.loads(json.dumps(head["history"]))
        [call] = [p for p in history[-1]["parts"] if p.get("tool_name") == "issue_refund"]
        args = json.loads(call["args"]) if isinstance(call["args"], str) else call["args"]
        call["args"] = "{not json"
        garbled = client.patch(f"/threads/{thread_id}/state", json={"values": {"history": history}})
        assert garbled.status_code == 400, garbled.text
        assert "are not a JSON object" in garbled.json()["errors"]["history"]
        call["args"] = json.dumps({**args, "amount_cents": -5})
        refused = client.patch(f"/threads/{thread_id}/state", json={"values": {"history": history}})
        assert refused.status_code == 400, refused.text
        assert "amount_cents" in refused.json()["errors"]["history"]  # the tool's own check
        call["args"] = json.dumps(args)
        twice = json.loads(json.dumps(history))
        twice[-1]["parts"].append(dict(call))  # the same call, under the same id, again
        doubled = client.patch(f"/threads/{thread_id}/state", json={"values": {"history": twice}})
        assert doubled.status_code == 400, doubled.text
        assert "used twice" in doubled.json()["errors"]["history"]
        empty = client.patch(f"/threads/{thread_id}/state", json={"values": {"history": []}})
        assert empty.status_code == 400, empty.text
        assert api.thread(thread_id)["values"] == head  # nothing changed

        call["args"] = json.dumps({**args, "amount_cents": 1000})
        response = client.patch(f"/threads/{thread_id}/state", json={"values": {"history": history}})
    assert response.status_code == 200, response.text

    [asked] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert asked["args"] == {"order_id": "ORD-1001", "amount_cents": 1000} and asked["id"] != approval["id"]
    assert ApprovalRequest.objects.get(pk=approval["id"]).status == "superseded"
    [proposed] = [
        c
        for m in api.thread(thread_id)["values"]["messages"]
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == "issue_refund"
    ]
    assert proposed["edited"] and json.loads(proposed["function"]["arguments"])["amount_cents"] == 1000
    decide(api, asked, {"decision": "approve"})
    wait_status(api, thread_id, "done")
    assert list(Refund.objects.values_list("amount_cents", flat=True)) == [1000]
