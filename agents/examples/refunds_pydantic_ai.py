"""The refunds agent written with pydantic-ai, behind Gatehouse's inbox: the same orders, tools
and refund ledger as the native `refunds` agent, through pydantic-ai's own OpenAI client."""

from typing import Annotated, Any

from django.conf import settings
from pydantic import Field
from pydantic_ai import Agent, DeferredToolRequests, RunContext
from pydantic_ai.models.openai import OpenAIChatModel
from pydantic_ai.providers.openai import OpenAIProvider

from agents.adapters.pydanticai import GatehouseDeps, PydanticAIAgent
from agents.examples.agents import REFUND_APPROVAL, OrderId, find_order, record_refund
from agents.registry import register

model = OpenAIChatModel(
    settings.OPENAI_MODEL,
    provider=OpenAIProvider(base_url=settings.OPENAI_BASE_URL, api_key=settings.OPENAI_API_KEY or "offline"),
)
support = Agent(
    model,
    deps_type=GatehouseDeps,
    output_type=[str, DeferredToolRequests],
    instructions=(
        "You are a customer-support agent. Look up the order before refunding it. "
        "Refund at most the order total. Be brief."
    ),
)


@support.tool_plain
def lookup_order(order_id: OrderId) -> dict[str, Any]:
    """Look up an order by its id (like ORD-1001): customer, email, total and status."""
    return find_order(order_id)


@support.tool(requires_approval=True)
def issue_refund(
    ctx: RunContext[GatehouseDeps],
    order_id: OrderId,  # the native agent's type: blank refused, whitespace stripped
    amount_cents: Annotated[int, Field(gt=0, le=1_000_000, description="Amount in cents")],
) -> dict[str, Any]:
    """Refund money to the customer of an order. Moves money: a human approves it first."""
    call_id = ctx.tool_call_id or ""

    def issue() -> dict[str, Any]:
        key = ctx.deps.idempotency_key(call_id)
        return record_refund(
            order_id=order_id, amount_cents=amount_cents, thread_id=ctx.deps.thread_id, idempotency_key=key
        )

    # Recorded with the step's checkpoint: a retried step returns this result, not a second refund.
    return ctx.deps.run_once(call_id, issue)


refunds_pydantic_ai = register(
    PydanticAIAgent(
        name="refunds_pydantic_ai",
        description="The refunds agent written with pydantic-ai (refunds need approval).",
        agent=support,
        gates={"issue_refund": REFUND_APPROVAL},  # the native agent's queue and wording
    )
)
