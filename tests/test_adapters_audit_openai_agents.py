"""Audit, as an engineer porting an OpenAI Agents SDK agent: its own run context reaches its tools,
and a model object (whose client belongs to one event loop) is refused up front. Through the
SDK's real classes against the offline model, over HTTP."""

import json
from dataclasses import dataclass
from typing import Any

import openai
import pytest

from agents.adapters.base import GatehouseDeps
from agents.adapters.openai_agents_sdk import OpenAIAgentsSDKAgent
from agents.adapters.openai_sdk import Agent, OpenAIChatCompletionsModel, ToolContext, function_tool
from agents.gates import HumanDecision
from agents.tools import Approval, Decision
from tests.segments import check_problems, run
from tests.test_adapters_audit_safety import lookup_order, refusal
from tests.test_sdk_features import then

pytestmark = pytest.mark.django_db(transaction=True)

APPROVAL = Approval(queue="refunds", decisions=(Decision.APPROVE, Decision.REJECT))
issued: list[Any] = []


@dataclass
class ShopContext:
    """An agent's own run context, as the SDK's docs write them: here holding Gatehouse's."""

    gatehouse: GatehouseDeps
    currency: str


@function_tool(needs_approval=True)
def issue_refund(ctx: ToolContext, order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    shop: ShopContext = ctx.context

    def issue() -> dict[str, Any]:
        issued.append((shop.gatehouse.thread_id, order_id, amount_cents, shop.currency))
        return {"status": "issued", "amount_cents": amount_cents}

    return json.dumps(shop.gatehouse.run_once(ctx.tool_call_id, issue))


def test_an_agents_own_context_is_built_for_each_step_and_reaches_its_tools(live_server_url: str) -> None:
    issued.clear()
    support = Agent(name="support", tools=[lookup_order, issue_refund])
    # Before, there was no way to give one: ctx.context was always the GatehouseDeps.
    agent = OpenAIAgentsSDKAgent(
        name="sdk_context",
        agent=support,
        gates={"issue_refund": APPROVAL},
        context=lambda gatehouse: ShopContext(gatehouse=gatehouse, currency="EUR"),
    )
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))
    waiting = run(agent, state)
    [gate] = waiting.gates

    done = run(
        agent, then(agent, state, waiting), {gate.key: HumanDecision(kind=Decision.APPROVE, reviewer="ada")}
    )

    assert done.goto is None and issued == [("t", "ORD-1001", 4250, "EUR")]


def test_a_model_object_built_for_another_event_loop_is_refused_at_check_and_never_runs(
    live_server_url: str,
) -> None:
    client = openai.AsyncOpenAI(base_url=f"{live_server_url}/offline/v1", api_key="x")
    support = Agent(
        name="support",
        model=OpenAIChatCompletionsModel(model="offline", openai_client=client),
        tools=[lookup_order, issue_refund],
    )
    agent = OpenAIAgentsSDKAgent(name="sdk_model", agent=support, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))

    # Before, it registered; a second segment met its client's connections of a closed loop.
    says = (
        "model is a OpenAIChatCompletionsModel object: name the model (a string), called through "
        "Chat Completions at OPENAI_BASE_URL"
    )
    assert check_problems(agent) == [f"Agent 'sdk_model': {says}"]
    assert says in refusal(agent, state)
