"""The refunds agent written as a LangGraph graph, behind Gatehouse's inbox: a plain StateGraph
whose tools node asks a person with `interrupt()` in LangChain's human-in-the-loop shape, calling
the model through LangChain's OpenAI chat model. Same orders, tools and refund ledger as the
native `refunds` agent."""

import json
from collections.abc import Iterator
from functools import partial
from typing import Annotated, Any, TypedDict

from django.conf import settings
from langchain_core.messages import AIMessage, AnyMessage, SystemMessage, ToolCall, ToolMessage
from langchain_core.tools import InjectedToolCallId, tool
from langchain_openai import ChatOpenAI
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt
from pydantic import Field, ValidationError

from agents import llm
from agents.adapters.langgraph_agent import LangGraphAgent, gatehouse_step
from agents.examples.agents import REFUND_APPROVAL, OrderId, find_order, record_refund
from agents.registry import register

PROMPT = "You are a customer-support agent. Look up the order before refunding it. Be brief."
GATED = {"issue_refund"}


@tool
def lookup_order(order_id: OrderId) -> str:
    """Look up an order by its id (like ORD-1001): customer, email, total and status."""
    return json.dumps(find_order(order_id))


@tool
def issue_refund(
    order_id: OrderId,  # the native agent's type: blank refused, whitespace stripped
    amount_cents: Annotated[int, Field(gt=0, le=1_000_000, title="Amount", description="Amount in cents")],
    tool_call_id: Annotated[str, InjectedToolCallId],
) -> str:
    """Refund money to the customer of an order. Moves money: a human approves it first."""
    step = gatehouse_step()
    key = step.idempotency_key(tool_call_id)
    return json.dumps(
        record_refund(
            order_id=order_id, amount_cents=amount_cents, thread_id=step.thread_id, idempotency_key=key
        )
    )


TOOLS = {t.name: t for t in (lookup_order, issue_refund)}


class Conversation(TypedDict):
    messages: Annotated[list[AnyMessage], add_messages]


def model() -> Any:
    return ChatOpenAI(
        model=settings.OPENAI_MODEL,
        base_url=settings.OPENAI_BASE_URL,
        api_key=settings.OPENAI_API_KEY or "offline",  # type: ignore[arg-type]
        max_retries=1,
        default_headers=llm.offline_headers() or None,
    ).bind_tools(list(TOOLS.values()))


def call_model(state: Conversation) -> dict[str, Any]:
    return {"messages": [model().invoke([SystemMessage(PROMPT), *state["messages"]])]}


def run_call(call: ToolCall) -> str:
    """A call's result: the tool's text, or its error, as the model reads it."""
    try:
        return str(TOOLS[call["name"]].invoke({**call, "type": "tool_call"}).content)
    except (KeyError, ValidationError) as exc:
        return f"Error: {exc}"


def run_tools(state: Conversation) -> dict[str, Any]:
    """Run the last message's tool calls; gated ones only as a person decides (resumed here)."""
    asked = state["messages"][-1]
    assert isinstance(asked, AIMessage)
    gated = [c for c in asked.tool_calls if c["name"] in GATED]
    decisions: Iterator[dict[str, Any]] = iter([])
    if gated:
        answer = interrupt(
            {
                "action_requests": [
                    {"name": c["name"], "args": c["args"], "description": REFUND_APPROVAL.describe(c["args"])}
                    for c in gated
                ],
                "review_configs": [
                    {"action_name": n, "allowed_decisions": ["approve", "edit", "reject"]} for n in GATED
                ],
            }
        )
        decisions = iter(answer["decisions"])
    calls, results = [], []
    for call in asked.tool_calls:
        if call["name"] not in GATED:
            content = run_call(call)
        elif (decision := next(decisions))["type"] == "reject":
            content = decision.get("message") or "Rejected by a human reviewer"
        else:
            if decision["type"] == "edit":
                call = {**call, "args": decision["edited_action"]["args"]}
            # Recorded with the step's checkpoint: a retried step gets this result, not a second refund.
            content = gatehouse_step().run_once(call["id"] or "", partial(run_call, call))
        calls.append(call)
        results.append(ToolMessage(content, tool_call_id=call["id"]))
    # The call as it ran (an edit rewrites it), under the same id: the model sees what happened.
    return {"messages": [asked.model_copy(update={"tool_calls": calls}), *results]}


def route(state: Conversation) -> str:
    last = state["messages"][-1]
    return "tools" if isinstance(last, AIMessage) and last.tool_calls else END


builder = StateGraph(Conversation)
builder.add_node("model", call_model)
builder.add_node("tools", run_tools)
builder.add_edge(START, "model")
builder.add_conditional_edges("model", route, ["tools", END])
builder.add_edge("tools", "model")

refunds_langgraph = register(
    LangGraphAgent(
        name="refunds_langgraph",
        description="The refunds agent written as a LangGraph graph (refunds need approval).",
        graph=builder,
        queue="refunds",
        approvals={"issue_refund": REFUND_APPROVAL},
        tools=[issue_refund],
    )
)
