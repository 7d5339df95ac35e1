"""The whole loop over the HTTP API: a real Celery worker, the offline model over HTTP, Postgres."""

from typing import Any

import pytest

from agents.examples.models import Refund
from tests.factories import Api, api_for, make_user
from tests.live import wait_for

pytestmark = pytest.mark.django_db(transaction=True)


@pytest.fixture
def api(live_server_url: str, celery_worker: Any) -> Api:
    return api_for(make_user("ada", "admin"), live_server_url)


def start(api: Api, text: str, agent: str = "refunds") -> str:
    response = api.post("/threads", {"agent": agent, "input": text})
    assert response.status_code == 201, response.text
    assert response.json()["status"] == "running"
    return response.json()["id"]


def wait_status(api: Api, thread_id: str, status: str) -> dict[str, Any]:
    return wait_for(
        lambda: (t := api.thread(thread_id))["status"] == status and t,
        timeout=20,
        message=f"thread {thread_id} to be {status}",
    )


def gate(api: Api, agent: str, text: str) -> tuple[str, dict[str, Any]]:
    """Start a thread and wait for its one gate: (thread id, its pending approval)."""
    thread_id = start(api, text, agent=agent)
    [approval] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    return thread_id, approval


def decide(api: Api, approval: dict[str, Any], body: dict[str, Any]) -> None:
    response = api.post(f"/approvals/{approval['id']}/decision", body)
    assert response.status_code == 200, response.text


def last_message(thread: dict[str, Any]) -> str:
    return thread["values"]["messages"][-1]["content"]


def tool_results(thread: dict[str, Any]) -> list[str]:
    """What the thread's tools answered, in order."""
    return [m["content"] for m in thread["values"]["messages"] if m["role"] == "tool"]


def test_approve_issues_the_refund_once_and_finishes(api: Api) -> None:
    thread_id = start(api, "Please refund order ORD-1001")
    waiting = wait_status(api, thread_id, "waiting")
    [approval] = waiting["pending_approvals"]
    assert approval["action"] == "issue_refund"
    assert approval["args"] == {"order_id": "ORD-1001", "amount_cents": 4250}
    assert Refund.objects.count() == 0

    decided = api.post(f"/approvals/{approval['id']}/decision", {"decision": "approve"})
    assert decided.status_code == 200, decided.text

    done = wait_status(api, thread_id, "done")
    assert "Refund of $42.50 issued for order ORD-1001" in last_message(done)
    assert list(Refund.objects.values_list("order_id", "amount_cents")) == [("ORD-1001", 4250)]


def test_edit_changes_the_amount_and_the_history_shows_the_edited_call(api: Api) -> None:
    thread_id = start(api, "Please refund order ORD-1002")
    [approval] = wait_status(api, thread_id, "waiting")["pending_approvals"]

    response = api.post(
        f"/approvals/{approval['id']}/decision",
        {"decision": "edit", "args": {"order_id": "ORD-1002", "amount_cents": 5000}},
    )
    assert response.status_code == 200, response.text

    done = wait_status(api, thread_id, "done")
    assert list(Refund.objects.values_list("amount_cents", flat=True)) == [5000]
    [call] = [
        c
        for m in done["values"]["messages"]
        for c in m.get("tool_calls") or []
        if c["function"]["name"] == "issue_refund"
    ]
    assert call["edited"] is True
    assert '"amount_cents": 5000' in call["function"]["arguments"]
    assert "Refund of $50.00 issued" in last_message(done)


def test_reject_feeds_the_reason_back_and_no_refund_is_recorded(api: Api) -> None:
    thread_id = start(api, "Please refund order ORD-1003")
    [approval] = wait_status(api, thread_id, "waiting")["pending_approvals"]

    response = api.post(
        f"/approvals/{approval['id']}/decision",
        {"decision": "reject", "message": "Outside the 30-day window"},
    )
    assert response.status_code == 200, response.text

    done = wait_status(api, thread_id, "done")
    assert tool_results(done)[-1] == "Rejected by a human reviewer: Outside the 30-day window"
    assert "Outside the 30-day window" in last_message(done)
    assert Refund.objects.count() == 0


def test_respond_puts_the_reviewer_text_in_the_tools_place(api: Api) -> None:
    thread_id = start(api, "Please refund order ORD-1001")
    [approval] = wait_status(api, thread_id, "waiting")["pending_approvals"]

    api.post(
        f"/approvals/{approval['id']}/decision",
        {"decision": "respond", "message": "Store credit sent instead"},
    )

    done = wait_status(api, thread_id, "done")
    assert "Store credit sent instead" in last_message(done)
    assert Refund.objects.count() == 0


def test_a_second_decision_gets_409_naming_who_decided(api: Api) -> None:
    thread_id = start(api, "Please refund order ORD-1001")
    [approval] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert api.post(f"/approvals/{approval['id']}/decision", {"decision": "approve"}).status_code == 200

    late = api.post(f"/approvals/{approval['id']}/decision", {"decision": "reject", "message": "no"})

    assert late.status_code == 409
    assert late.json() == {"detail": "Already approved by ada.", "errors": None}  # README's shape
    wait_status(api, thread_id, "done")
    assert Refund.objects.count() == 1


def test_invalid_edit_is_refused_with_field_errors_and_changes_nothing(api: Api) -> None:
    thread_id = start(api, "Please refund order ORD-1001")
    [approval] = wait_status(api, thread_id, "waiting")["pending_approvals"]

    response = api.post(
        f"/approvals/{approval['id']}/decision",
        {"decision": "edit", "args": {"order_id": "ORD-1001", "amount_cents": -5}},
    )

    assert response.status_code == 400
    assert response.json()["errors"] == {"args.amount_cents": "Amount must be greater than 0"}
    assert api.thread(thread_id)["status"] == "waiting"
    assert api.get("/approvals", status="pending").json()[0]["id"] == approval["id"]


def test_parallel_gated_calls_resume_once_all_are_decided(api: Api) -> None:
    thread_id = start(api, "Please refund orders ORD-1001 and ORD-1003")
    first, second = wait_status(api, thread_id, "waiting")["pending_approvals"]

    api.post(f"/approvals/{first['id']}/decision", {"decision": "approve"})
    assert api.thread(thread_id)["status"] == "waiting"
    api.post(f"/approvals/{second['id']}/decision", {"decision": "reject", "message": "already refunded"})

    done = wait_status(api, thread_id, "done")
    assert list(Refund.objects.values_list("order_id", flat=True)) == [first["args"]["order_id"]]
    assert "already refunded" in last_message(done)


def test_outreach_sends_the_edited_email(api: Api) -> None:
    from agents.examples.models import SentEmail

    thread_id = start(api, "Email bob@example.com about the launch", agent="outreach")
    [approval] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert approval["allowed_decisions"] == ["approve", "edit", "reject"]
    args = {**approval["args"], "subject": "Launch moved to Friday"}

    assert (
        api.post(f"/approvals/{approval['id']}/decision", {"decision": "edit", "args": args}).status_code
        == 200
    )

    wait_status(api, thread_id, "done")
    assert list(SentEmail.objects.values_list("to", "subject")) == [
        ("bob@example.com", "Launch moved to Friday")
    ]


def test_unknown_agent_and_empty_input_are_refused_clearly(api: Api) -> None:
    response = api.post("/threads", {"agent": "nope", "input": ""})

    assert response.status_code == 400
    assert set(response.json()["errors"]) == {"agent", "input"}
    assert "refunds" in response.json()["errors"]["agent"]
