"""Audit, as a model choosing its tool call ids badly (a prompt can steer it): an empty id, one
too long to key a gate, or one used twice (in one response, or again later in the run) fails
no step of a pydantic-ai or OpenAI Agents SDK agent. Each is renamed deterministically before
the framework reads the response, as Gatehouse's own agents do (`llm.distinct_ids`): each call
gets its own gate, and the approved calls run, once each. Through the frameworks' real classes
against the offline model, its replies' ids rewritten by a proxy standing in for such a model."""

import json
import threading
import urllib.request
from collections.abc import Callable, Iterator
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Any

import pytest
from django.test import override_settings

from agents.adapters.openai_agents_sdk import OpenAIAgentsSDKAgent
from agents.adapters.openai_sdk import Agent, ToolContext, function_tool
from agents.adapters.pydanticai import PydanticAIAgent
from agents.gates import HumanDecision
from agents.messages import MAX_CALL_ID_CHARS
from agents.tools import Approval, Decision
from tests import test_pydantic_ai_features, test_sdk_features
from tests.segments import run
from tests.test_adapters_audit_safety import lookup_order, pydantic_refunds

pytestmark = pytest.mark.django_db(transaction=True)

APPROVAL = Approval(queue="refunds", decisions=(Decision.APPROVE, Decision.REJECT))
PROMPT = "Please refund orders ORD-1001 and ORD-1002"
IDS: dict[str, Callable[[str], str]] = {
    "empty": lambda given: "",
    "too long": lambda given: given.ljust(MAX_CALL_ID_CHARS + 1, "x"),
    "repeated": lambda given: "call_1",
}
issued: list[Any] = []


def model_choosing(url: str, new_id: Callable[[str], str]) -> Iterator[str]:
    """The offline model at `url`, behind a proxy that gives each of its tool calls `new_id`."""

    class Proxy(BaseHTTPRequestHandler):
        def do_POST(self) -> None:
            body = self.rfile.read(int(self.headers["content-length"]))
            asked = urllib.request.Request(
                url + self.path, data=body, headers={"content-type": "application/json"}
            )
            with urllib.request.urlopen(asked) as answer:
                reply = json.loads(answer.read())
            for call in reply["choices"][0]["message"].get("tool_calls") or []:
                call["id"] = new_id(call["id"])
            out = json.dumps(reply).encode()
            self.send_response(200)
            self.send_header("content-type", "application/json")
            self.send_header("content-length", str(len(out)))
            self.end_headers()
            self.wfile.write(out)

        def log_message(self, format: str, *args: Any) -> None:
            pass

    server = ThreadingHTTPServer(("127.0.0.1", 0), Proxy)
    threading.Thread(target=server.serve_forever, daemon=True).start()
    try:
        yield f"http://127.0.0.1:{server.server_port}"
    finally:
        server.shutdown()
        server.server_close()


def approve_all(agent: Any, state: Any, *, then: Callable[[Any, Any, Any], Any]) -> tuple[Any, Any]:
    """Run to the gates, approve each, and run on: (the gated step, the last step)."""
    waiting = run(agent, state)
    decided = {gate.key: HumanDecision(kind=Decision.APPROVE, reviewer="ada") for gate in waiting.gates}
    return waiting, run(agent, then(agent, state, waiting), decided)


def assert_each_call_gated_and_run_once(waiting: Any, done: Any) -> None:
    keys = [gate.key for gate in waiting.gates]
    assert [gate.args["order_id"] for gate in waiting.gates] == ["ORD-1001", "ORD-1002"]
    assert len(set(keys)) == 2 and all(0 < len(key) <= MAX_CALL_ID_CHARS for key in keys)
    assert sorted(issued) == [("ORD-1001", 4250), ("ORD-1002", 4250)]
    assert done.goto is None
    assert "Refund of $42.50 issued for order ORD-1002" in done.update["messages"][-1]["content"]


@pytest.mark.parametrize("chosen", list(IDS))
def test_a_pydantic_ai_models_unusable_call_ids_are_renamed_and_each_call_is_gated(
    live_server_url: str, chosen: str
) -> None:
    issued.clear()
    for url in model_choosing(live_server_url, IDS[chosen]):
        support = pydantic_refunds(url)

        @support.tool_plain(requires_approval=True)
        def issue_refund(order_id: str, amount_cents: int) -> str:
            issued.append((order_id, amount_cents))
            return json.dumps({"status": "issued", "amount_cents": amount_cents})

        agent = PydanticAIAgent(name="pai_ids", agent=support, gates={"issue_refund": APPROVAL})
        state = agent.state.model_validate(agent.input_update(PROMPT))

        # Before, a repeated id failed the step (pydantic-ai refuses it), and a long one could
        # not open its gate.
        waiting, done = approve_all(agent, state, then=test_pydantic_ai_features.then)

        assert_each_call_gated_and_run_once(waiting, done)
        if chosen != "empty":  # (pydantic-ai itself gives an empty id a random one)
            replayed = run(agent, state)  # a retried step sees the same ids
            assert [gate.key for gate in replayed.gates] == [gate.key for gate in waiting.gates]


@function_tool(needs_approval=True)
def issue_refund(ctx: ToolContext, order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    issued.append((order_id, amount_cents))
    return json.dumps({"status": "issued", "amount_cents": amount_cents})


@pytest.mark.parametrize("chosen", list(IDS))
def test_an_sdk_models_unusable_call_ids_are_renamed_and_each_call_is_gated(
    live_server_url: str, chosen: str
) -> None:
    issued.clear()
    for url in model_choosing(live_server_url, IDS[chosen]):
        with override_settings(OPENAI_BASE_URL=f"{url}/offline/v1"):
            support = Agent(name="support", tools=[lookup_order, issue_refund])
            agent = OpenAIAgentsSDKAgent(name="sdk_ids", agent=support, gates={"issue_refund": APPROVAL})
            state = agent.state.model_validate(agent.input_update(PROMPT))

            # Before, the SDK refused the run (ModelBehaviorError): an empty id, or one reused.
            waiting, done = approve_all(agent, state, then=test_sdk_features.then)

            assert_each_call_gated_and_run_once(waiting, done)
            replayed = run(agent, state)  # a retried step sees the same ids
            assert [gate.key for gate in replayed.gates] == [gate.key for gate in waiting.gates]
