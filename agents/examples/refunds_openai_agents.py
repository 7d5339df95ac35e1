"""The refunds agent written with the OpenAI Agents SDK, behind Gatehouse's inbox: the same orders,
tools and refund ledger as the native `refunds` agent, through the SDK's Chat Completions model."""

import json
from typing import Annotated, Any

from pydantic import Field

from agents.adapters.openai_agents_sdk import OpenAIAgentsSDKAgent
from agents.adapters.openai_sdk import Agent, ToolContext, function_tool
from agents.examples.agents import REFUND_APPROVAL, OrderId, find_order, record_refund
from agents.registry import register


@function_tool
def lookup_order(order_id: OrderId) -> str:
    """Look up an order by its id (like ORD-1001): customer, email, total and status."""
    return json.dumps(find_order(order_id))  # the SDK would send a dict as its repr, not JSON


@function_tool(needs_approval=True)
def issue_refund(
    ctx: ToolContext,
    order_id: OrderId,  # the native agent's type: blank refused, whitespace stripped
    amount_cents: Annotated[int, Field(gt=0, le=1_000_000, description="Amount in cents")],
) -> str:
    """Refund money to the customer of an order. Moves money: a human approves it first."""
    deps = ctx.context  # GatehouseDeps: the step's

    def issue() -> dict[str, Any]:
        key = deps.idempotency_key(ctx.tool_call_id)
        return record_refund(
            order_id=order_id, amount_cents=amount_cents, thread_id=deps.thread_id, idempotency_key=key
        )

    # Recorded with the step's checkpoint: a retried step returns this result, not a second refund.
    return json.dumps(deps.run_once(ctx.tool_call_id, issue))


support = Agent(
    name="support",
    # No model: OPENAI_MODEL, through Chat Completions at OPENAI_BASE_URL (the adapter's client).
    instructions=(
        "You are a customer-support agent. Look up the order before refunding it. "
        "Refund at most the order total. Be brief."
    ),
    tools=[lookup_order, issue_refund],
)

refunds_openai_agents = register(
    OpenAIAgentsSDKAgent(
        name="refunds_openai_agents",
        description="The refunds agent written with the OpenAI Agents SDK (refunds need approval).",
        agent=support,
        gates={"issue_refund": REFUND_APPROVAL},  # the native agent's queue and wording
    )
)
