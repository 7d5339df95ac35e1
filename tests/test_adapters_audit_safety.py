"""Audit, as an engineer porting an agent: nothing an agent is built with lets a gated action run
without a reviewer's approval, even when `manage.py check` was never run where the worker runs
(a Celery worker runs no system checks): each segment refuses, before any tool runs, an agent
whose definition would let a call needing approval escape its gate. Each through the framework's
real classes against the offline model, over HTTP."""

import importlib
import json
from typing import Any

import pytest

from agents.adapters.openai_agents_sdk import OpenAIAgentsSDKAgent
from agents.adapters.openai_sdk import NAME, Agent, ToolContext, function_tool, sdk
from agents.gates import HumanDecision
from agents.tools import Approval, Decision
from tests.segments import check_problems, run
from tests.test_pydantic_ai_features import then

pytestmark = pytest.mark.django_db(transaction=True)

APPROVAL = Approval(queue="refunds", decisions=(Decision.APPROVE, Decision.REJECT))
issued: list[tuple[str, int]] = []


@function_tool
def lookup_order(order_id: str) -> str:
    """Look up an order by its id."""
    return json.dumps({"order_id": order_id, "total_cents": 4250})


@function_tool(needs_approval=True)
def issue_refund(ctx: ToolContext, order_id: str, amount_cents: int) -> str:
    """Refund an order (gated)."""
    issued.append((order_id, amount_cents))
    return json.dumps({"status": "issued", "amount_cents": amount_cents})


@function_tool(name_override="issue_refund")
def issue_refund_ungated(order_id: str, amount_cents: int) -> str:
    """Refund an order (no approval declared)."""
    issued.append((order_id, amount_cents))
    return json.dumps({"status": "issued", "amount_cents": amount_cents})


def refusal(agent: Any, state: Any) -> str:
    """Why the segment refused to run ("" if it ran)."""
    try:
        run(agent, state)
    except RuntimeError as exc:
        return str(exc)
    return ""


def test_a_handoff_to_an_agent_whose_refund_is_not_gated_never_refunds(live_server_url: str) -> None:
    issued.clear()
    billing = Agent(name="billing", tools=[lookup_order, issue_refund_ungated])
    # The offline model calls lookup_order: here that is the handoff to billing.
    to_billing = sdk.handoff(billing, tool_name_override="lookup_order")
    triage = Agent(name="triage", tools=[issue_refund], handoffs=[to_billing])
    agent = OpenAIAgentsSDKAgent(name="sdk_handoff", agent=triage, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund $20 on order ORD-1001"))

    refused = refusal(agent, state)

    # Before, the run handed off and billing's refund ran with nobody asked.
    assert issued == []
    assert "handoffs are not supported" in refused


def pydantic_refunds(url: str, **options: Any) -> Any:
    """A pydantic-ai agent the offline model runs its refunds script with (its issue_refund is
    the test's)."""
    from pydantic_ai import Agent as PydanticAgent
    from pydantic_ai import DeferredToolRequests
    from pydantic_ai.models.openai import OpenAIChatModel
    from pydantic_ai.providers.openai import OpenAIProvider

    model = OpenAIChatModel("offline", provider=OpenAIProvider(base_url=f"{url}/offline/v1", api_key="x"))
    agent: Any = PydanticAgent(model, output_type=[str, DeferredToolRequests], **options)

    @agent.tool_plain
    def lookup_order(order_id: str) -> dict[str, Any]:
        return {"order_id": order_id, "total_cents": 4250}

    return agent


def test_a_pydantic_ai_tool_whose_prepare_rebuilds_its_definition_still_waits_for_approval(
    live_server_url: str,
) -> None:
    from pydantic_ai import RunContext
    from pydantic_ai.tools import ToolDefinition

    from agents.adapters.pydanticai import PydanticAIAgent

    issued.clear()
    support = pydantic_refunds(live_server_url)

    async def described(ctx: RunContext[Any], tool_def: ToolDefinition) -> ToolDefinition:
        # A prepare function as people write them: a fresh definition with a better description
        # (it leaves out kind="unapproved", which is how requires_approval reaches the run).
        return ToolDefinition(
            name=tool_def.name,
            description="Refund an order; say the amount in cents.",
            parameters_json_schema=tool_def.parameters_json_schema,
        )

    @support.tool_plain(requires_approval=True, prepare=described)
    def issue_refund(order_id: str, amount_cents: int) -> str:
        issued.append((order_id, amount_cents))
        return json.dumps({"status": "issued", "amount_cents": amount_cents})

    agent = PydanticAIAgent(name="pai_prepared", agent=support, gates={"issue_refund": APPROVAL})
    assert agent.definition_errors() == []
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))

    waiting = run(agent, state)

    # Before, pydantic-ai read the rebuilt definition as an ordinary tool: the refund ran unasked.
    assert issued == []
    [gate] = waiting.gates
    assert (gate.action, gate.args) == ("issue_refund", {"order_id": "ORD-1001", "amount_cents": 4250})

    done = run(
        agent, then(agent, state, waiting), {gate.key: HumanDecision(kind=Decision.APPROVE, reviewer="ada")}
    )

    assert done.goto is None and issued == [("ORD-1001", 4250)]
    assert "Refund of $42.50 issued for order ORD-1001" in done.update["messages"][-1]["content"]


def test_a_second_sdk_tool_of_a_gated_tools_name_is_refused_and_never_runs(live_server_url: str) -> None:
    issued.clear()
    # The SDK calls the last tool of a name; the gate was checked on the first.
    support = Agent(name="support", tools=[lookup_order, issue_refund, issue_refund_ungated])
    agent = OpenAIAgentsSDKAgent(name="sdk_twice", agent=support, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))

    problems = check_problems(agent)
    refused = refusal(agent, state)

    # Before, the checks passed and the ungated twin refunded with nobody asked.
    assert issued == []
    says = "tool name 'issue_refund' is used twice: give each tool its own name"
    assert problems == [f"Agent 'sdk_twice': {says}"]
    assert says in refused


def test_sdk_mcp_servers_and_hosted_tools_are_refused_at_check_and_never_run(live_server_url: str) -> None:
    issued.clear()
    stdio = importlib.import_module(f"{NAME}.mcp").MCPServerStdio
    files = stdio(params={"command": "true"}, name="files", require_approval="always")
    hosted = sdk.HostedMCPTool(
        tool_config={"type": "mcp", "server_label": "billing", "server_url": "https://example.com/mcp"},
        on_approval_request=lambda request: {"approve": True},  # the SDK approving for a person
    )
    support = Agent(name="support", tools=[lookup_order, issue_refund, hosted], mcp_servers=[files])
    # An agent used as a tool, which hands off, and whose refund (gated here) is not gated there.
    refunder = Agent(
        name="refunder", tools=[lookup_order, issue_refund_ungated], handoffs=[Agent(name="billing")]
    )
    nested = Agent(
        name="nested",
        tools=[
            lookup_order,
            issue_refund,
            refunder.as_tool(tool_name="refunds", tool_description="Refunds."),
        ],
    )
    agent = OpenAIAgentsSDKAgent(name="sdk_mcp", agent=support, gates={"issue_refund": APPROVAL})
    state = agent.state.model_validate(agent.input_update("Please refund order ORD-1001"))

    problems = check_problems(agent) + check_problems(
        OpenAIAgentsSDKAgent(name="sdk_nested", agent=nested, gates={"issue_refund": APPROVAL})
    )
    refused = refusal(agent, state)

    # Before, both registered: an MCP tool could not be gated at all, and the hosted MCP tool's
    # approvals were the SDK's callback's, not a person's.
    assert problems == [
        "Agent 'sdk_mcp': MCP servers are not supported ('files'): their tools cannot be gated; "
        "wrap the calls you need in function tools",
        "Agent 'sdk_mcp': tool 'hosted_mcp' is a HostedMCPTool: only function tools are supported",
        "Agent 'sdk_nested': tool 'refunds' runs agent 'refunder': handoffs are not supported: "
        "a segment runs one agent",
        "Agent 'sdk_nested': tool 'refunds' runs agent 'refunder': its tool 'issue_refund' is gated "
        "here but not there, so it would run unasked: give that tool to this agent only",
    ]
    assert "MCP servers are not supported" in refused and issued == []
