"""What every framework adapter does alike, for each example agent written with another
framework, over the HTTP API with a real Celery worker and the offline model: an edit runs the
edited call and shows it edited, a bad edit is a 400 naming the field, a rejection (a person's or
a policy's) reaches the model as a reason and refunds nothing, and an approved call shows as
already done; for the agents whose runs are tool calls, a response stands in for the result and
a waiting thread exports and imports."""

from typing import Any

import pytest
from django.test import Client

from agents.examples.models import Refund
from approvals.actions.policies import do_create_policy
from checkpoints.models import Checkpoint
from tests.factories import Api, api_for, make_user
from tests.test_refunds_flow import (
    decide,
    gate,
    last_message,
    start,
    tool_results,
    wait_status,
)

pytestmark = pytest.mark.django_db(transaction=True)

AGENTS = ["refunds_pydantic_ai", "refunds_langgraph", "refunds_openai_agents"]
SEGMENT_TOOLS = ["refunds_pydantic_ai", "refunds_openai_agents"]  # a run's tool calls, no graph


@pytest.fixture
def api(live_server_url: str, celery_worker: Any) -> Api:
    return api_for(make_user("ada", "admin"), live_server_url)


@pytest.mark.parametrize("agent", AGENTS)
def test_an_edit_runs_the_edited_call_and_the_call_is_shown_edited(api: Api, agent: str) -> None:
    thread_id, approval = gate(api, agent, "Please refund order ORD-1002")

    decide(api, approval, {"decision": "edit", "args": {"order_id": "ORD-1002", "amount_cents": 5000}})

    done = wait_status(api, thread_id, "done")
    assert list(Refund.objects.values_list("amount_cents", flat=True)) == [5000]
    assert "Refund of $50.00 issued" in last_message(done)
    [call] = [
        c
        for m in done["values"]["messages"]
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == "issue_refund"
    ]
    assert call["edited"] is True and '"amount_cents": 5000' in call["function"]["arguments"]


@pytest.mark.parametrize("agent", AGENTS)
def test_an_edit_the_tool_refuses_is_a_400_naming_the_field(api: Api, agent: str) -> None:
    thread_id, approval = gate(api, agent, "Please refund order ORD-1001")

    response = api.post(
        f"/approvals/{approval['id']}/decision",
        {"decision": "edit", "args": {"order_id": "ORD-1001", "amount_cents": -5}},
    )

    assert response.status_code == 400, response.text
    assert response.json()["errors"] == {"args.amount_cents": "Amount cents must be greater than 0"}
    assert api.thread(thread_id)["status"] == "waiting"


@pytest.mark.parametrize("agent", AGENTS)
def test_a_rejection_reaches_the_model_with_its_reason_and_refunds_nothing(api: Api, agent: str) -> None:
    thread_id, approval = gate(api, agent, "Please refund order ORD-1003")

    decide(api, approval, {"decision": "reject", "message": "Outside the 30-day window"})

    done = wait_status(api, thread_id, "done")
    assert tool_results(done)[-1] == "Rejected by a human reviewer: Outside the 30-day window"
    assert "Outside the 30-day window" in last_message(done)
    assert Refund.objects.count() == 0


@pytest.mark.parametrize("agent", AGENTS)
def test_an_approved_call_shows_as_already_done_on_its_thread(api: Api, agent: str) -> None:
    # What the fork dialog and policies' `effects` read (approvals.effects): the tool's result
    # recorded under the gate's key, as a native agent's gated tool records it.
    thread_id, approval = gate(api, agent, "Please refund order ORD-1001")
    decide(api, approval, {"decision": "approve"})
    wait_status(api, thread_id, "done")
    browser = Client()
    browser.force_login(make_user("olga", "operator"))

    first = Checkpoint.objects.get(thread_id=thread_id, step=0)
    html = browser.get(f"/threads/{thread_id}/checkpoints/{first.pk}/").content.decode()

    effects = html.partition("data-effects>")[2].partition("</div>")[0]
    assert "Already done on this thread" in effects
    assert "Refund <strong>$42.50</strong> to the customer of order <code>ORD-1001</code>" in effects


@pytest.mark.parametrize("agent", AGENTS)
def test_a_policys_deny_reaches_the_model_naming_the_policy_and_refunds_nothing(api: Api, agent: str) -> None:
    do_create_policy(
        actor=None,
        fields={
            "name": "no refunds",
            "tool": "issue_refund",
            "when": "true",
            "action": "deny",
            "message": "Ask a manager.",
        },
    )
    thread_id = start(api, "Please refund order ORD-1003", agent=agent)

    done = wait_status(api, thread_id, "done")
    assert tool_results(done)[-1] == "Rejected automatically by policy 'no refunds' v1: Ask a manager."
    assert Refund.objects.count() == 0


@pytest.mark.parametrize("agent", SEGMENT_TOOLS)
def test_respond_puts_the_reviewers_text_in_the_tools_place(api: Api, agent: str) -> None:
    thread_id, approval = gate(api, agent, "Please refund order ORD-1001")

    decide(api, approval, {"decision": "respond", "message": "Store credit sent instead"})

    done = wait_status(api, thread_id, "done")
    assert tool_results(done)[-1] == "Store credit sent instead"
    assert "Store credit sent instead" in last_message(done)
    assert Refund.objects.count() == 0


@pytest.mark.parametrize("agent", SEGMENT_TOOLS)
def test_an_exported_waiting_thread_imports_with_its_gate_asked_afresh_and_runs_on(
    api: Api, agent: str
) -> None:
    thread_id, approval = gate(api, agent, "Please refund order ORD-1002")
    document = api.get(f"/threads/{thread_id}/export").json()
    copy = f"{agent}-copy-1"

    response = api.post(f"/imports?thread_id={copy}", document)

    assert response.status_code == 201, response.text
    [asked] = wait_status(api, copy, "waiting")["pending_approvals"]
    assert (asked["action"], asked["args"]) == ("issue_refund", approval["args"])
    decide(api, asked, {"decision": "approve"})
    done = wait_status(api, copy, "done")
    assert "Refund of $129.99 issued for order ORD-1002" in last_message(done)
    assert list(Refund.objects.values_list("thread_id", flat=True)) == [copy]
