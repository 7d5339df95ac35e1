"""An OpenAI Agents SDK agent behind the inbox: the `refunds_openai_agents` example over the HTTP
API, with a real Celery worker and the offline model reached through the SDK's Chat Completions
model. (Edits, rejections and policies: tests/test_framework_agents_flow.py, for every adapter.)"""

import threading
from collections.abc import Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import openai
import pytest
from django.db import OperationalError
from django.test import Client

from agents import llm
from agents.examples.models import Refund
from agents.gates import HumanDecision
from agents.graph import StepContext
from agents.registry import registry
from agents.runtime import EffectWithdrawn
from agents.tools import Decision
from approvals.models import ApprovalRequest
from tests.factories import Api, api_for, make_user
from tests.test_refunds_flow import decide, gate, last_message, wait_status

pytestmark = pytest.mark.django_db(transaction=True)

AGENT = "refunds_openai_agents"


@pytest.fixture
def api(live_server_url: str, celery_worker: Any) -> Api:
    return api_for(make_user("ada", "admin"), live_server_url)


def test_approve_runs_the_tool_once_through_the_sdk_and_finishes(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")
    assert (approval["action"], approval["queue"]) == ("issue_refund", "refunds")
    assert approval["args"] == {"order_id": "ORD-1001", "amount_cents": 4250}
    schema = registry.get(AGENT).edit_schema("issue_refund")  # the edit form's, from the SDK tool
    assert schema["properties"]["amount_cents"]["exclusiveMinimum"] == 0
    waiting = api.thread(thread_id)["values"]
    assert waiting["state_format"] == "openai-agents/0.24" and waiting["run_state"]["$schemaVersion"]
    assert Refund.objects.count() == 0

    decide(api, approval, {"decision": "approve"})

    done = wait_status(api, thread_id, "done")
    assert "Refund of $42.50 issued for order ORD-1001" in last_message(done)
    [refund] = Refund.objects.all()
    assert (refund.order_id, refund.amount_cents, refund.thread_id) == ("ORD-1001", 4250, thread_id)
    assert refund.idempotency_key.endswith(ApprovalRequest.objects.get(pk=approval["id"]).key)
    assert done["values"]["run_state"] is None
    assert done["values"]["history"][0] == {"role": "user", "content": "Please refund order ORD-1001"}
    roles = [m["role"] for m in done["values"]["messages"]]
    assert roles == ["user", "assistant", "tool", "assistant", "tool", "assistant"]


def test_a_second_prompt_continues_the_finished_conversation(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")
    decide(api, approval, {"decision": "approve"})
    wait_status(api, thread_id, "done")

    response = api.post(f"/threads/{thread_id}/messages", {"input": "Please refund order ORD-1003"})

    assert response.status_code == 200, response.text
    [asked] = wait_status(api, thread_id, "waiting")["pending_approvals"]
    assert asked["args"] == {"order_id": "ORD-1003", "amount_cents": 1999}
    decide(api, asked, {"decision": "approve"})
    done = wait_status(api, thread_id, "done")
    assert sorted(Refund.objects.values_list("order_id", flat=True)) == ["ORD-1001", "ORD-1003"]
    assert "ORD-1001" in done["values"]["history"][0]["content"]  # the model read the first run


def test_an_operators_edit_of_the_sdk_state_is_refused_with_the_reason(api: Api) -> None:
    thread_id, _ = gate(api, AGENT, "Please refund order ORD-1001")
    head = api.thread(thread_id)["values"]
    page = Client()
    page.force_login(make_user("olga", "admin"))
    assert "the SDK&#x27;s run state" in page.get(f"/threads/{thread_id}/state/").content.decode()
    with api._client() as client:
        refused = client.patch(f"/threads/{thread_id}/state", json={"values": {"run_state": {}}})
    assert refused.status_code == 400, refused.text
    assert "decide its calls in the inbox" in refused.json()["errors"]["run_state"]
    assert api.thread(thread_id)["values"] == head


def test_saving_the_sdk_state_unchanged_writes_nothing_and_asks_nothing_again(api: Api) -> None:
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1001")
    head = api.thread(thread_id)
    page = Client()
    page.force_login(make_user("olga", "admin"))
    shown = page.get(f"/threads/{thread_id}/state/").context["text"]

    saved = page.post(f"/threads/{thread_id}/state/", {"values": shown}, follow=True)
    with api._client() as client:
        patched = client.patch(f"/threads/{thread_id}/state", json={"values": {}})

    assert "Nothing changed." in saved.content.decode()
    assert patched.status_code == 409, patched.text
    after = api.thread(thread_id)
    assert after["head"] == head["head"]
    assert [a["id"] for a in after["pending_approvals"]] == [approval["id"]]
    assert ApprovalRequest.objects.filter(thread_id=thread_id).count() == 1


@pytest.fixture
def model_answering() -> Iterator[Any]:
    """A model endpoint answering every request with the status the test sets."""

    class Answer(BaseHTTPRequestHandler):
        status = 503

        def do_POST(self) -> None:
            self.rfile.read(int(self.headers["Content-Length"]))
            self.send_response(Answer.status)
            self.send_header("Content-Type", "application/json")
            self.end_headers()
            self.wfile.write(b'{"error": {"message": "nope"}}')

        def log_message(self, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Answer)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    Answer.url = f"http://127.0.0.1:{server.server_address[1]}/v1"  # type: ignore[attr-defined]
    yield Answer
    server.shutdown()


@pytest.mark.parametrize("status", [503, 429])
def test_a_model_server_error_is_unavailable_so_the_step_is_retried(
    settings: Any, model_answering: Any, status: int
) -> None:
    settings.OPENAI_BASE_URL, model_answering.status = model_answering.url, status
    agent: Any = registry.get(AGENT)
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    ctx = StepContext(thread_id="t", checkpoint_id="c", decisions={}, run_once=lambda key, fn: fn())

    with pytest.raises(llm.ModelUnavailable, match="model unavailable"):
        agent.run_segment(state, ctx)


def test_a_request_the_model_refuses_fails_the_step(settings: Any, model_answering: Any) -> None:
    settings.OPENAI_BASE_URL, model_answering.status = model_answering.url, 400
    agent: Any = registry.get(AGENT)
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    ctx = StepContext(thread_id="t", checkpoint_id="c", decisions={}, run_once=lambda key, fn: fn())

    with pytest.raises(openai.BadRequestError):
        agent.run_segment(state, ctx)


def approved_refund_step(api: Api, *, run_once: Any) -> Any:
    """Run the step after a waiting refund's approval, the refund's run_once being `run_once`."""
    thread_id, approval = gate(api, AGENT, "Please refund order ORD-1002")
    agent: Any = registry.get(AGENT)
    state = agent.state.model_validate(api.thread(thread_id)["values"])
    key = ApprovalRequest.objects.get(pk=approval["id"]).key
    decisions = {key: HumanDecision(kind=Decision.APPROVE, reviewer="ada")}
    ctx = StepContext(thread_id=thread_id, checkpoint_id="c", decisions=decisions, run_once=run_once)
    return agent.run_segment(state, ctx)


@pytest.mark.parametrize(
    "error", [OperationalError("lock timeout"), EffectWithdrawn("the thread was cancelled before the refund")]
)
def test_an_error_the_runtime_must_see_in_the_approved_tool_is_raised_not_read_by_the_model(
    api: Api, error: Exception
) -> None:
    def failing(key: str, fn: Any) -> Any:
        raise error

    # The SDK hands a tool's error to the model as text; the step must roll back and retry instead.
    with pytest.raises(type(error), match=str(error)):
        approved_refund_step(api, run_once=failing)


def test_an_ordinary_error_in_the_approved_tool_is_read_by_the_model_as_the_sdk_does(api: Api) -> None:
    def failing(key: str, fn: Any) -> Any:
        raise ValueError("order is locked by finance")

    step = approved_refund_step(api, run_once=failing)

    results = [m["content"] for m in step.update["messages"] if m["role"] == "tool"]
    assert results == ["An error occurred while running the tool. Please try again."]
    assert Refund.objects.count() == 0
