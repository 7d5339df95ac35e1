"""Several interrupts at once (parallel nodes, each asking a person): each action is a request
of its own, and the decisions resume every interrupt by its id in one Command (README,
"LangGraph"). In-process: the adapter's segment against a real compiled graph and saver."""

import operator
from typing import Annotated, Any, TypedDict

import pytest
from langchain_core.messages import AnyMessage
from langgraph.graph import END, START, StateGraph
from langgraph.graph.message import add_messages
from langgraph.types import interrupt

from agents.adapters.langgraph_agent import LangGraphAgent, LangGraphState
from agents.gates import Decision, HumanDecision
from agents.graph import StepContext

pytestmark = pytest.mark.django_db(transaction=True)


class Orders(TypedDict, total=False):
    messages: Annotated[list[AnyMessage], add_messages]
    outcomes: Annotated[list[str], operator.add]


def asks_about(order_id: str) -> Any:
    def node(state: Orders) -> dict[str, Any]:
        request = {"action_requests": [{"name": "issue_refund", "args": {"order_id": order_id}}]}
        [answer] = interrupt(request)["decisions"]
        return {"outcomes": [f"{order_id}: {answer['type']} {answer.get('message', '')}".strip()]}

    return node


def parallel_agent() -> LangGraphAgent:
    builder = StateGraph(Orders)
    builder.add_node("first", asks_about("ORD-1001"))
    builder.add_node("second", asks_about("ORD-1003"))
    builder.add_edge(START, "first")
    builder.add_edge(START, "second")
    builder.add_edge("first", END)
    builder.add_edge("second", END)
    return LangGraphAgent(name="lg-parallel", graph=builder)


def context(decisions: dict[str, HumanDecision]) -> StepContext:
    return StepContext(
        thread_id="lg-parallel-1", checkpoint_id="c", decisions=decisions, run_once=lambda _key, fn: fn()
    )


def test_two_interrupts_at_once_are_two_requests_each_resumed_by_its_own_id() -> None:
    agent = parallel_agent()
    try:
        asked = agent.run_segment(LangGraphState(prompt="Refund ORD-1001 and ORD-1003"), context({}))
        by_order = {g.args["order_id"]: g for g in asked.gates}
        interrupt_ids = {g.key.rsplit(":", 1)[0] for g in asked.gates}
        assert sorted(by_order) == ["ORD-1001", "ORD-1003"] and len(interrupt_ids) == 2

        state = LangGraphState.model_validate(asked.update)
        decisions = {
            by_order["ORD-1001"].key: HumanDecision(kind=Decision.APPROVE, reviewer="rita"),
            by_order["ORD-1003"].key: HumanDecision(kind=Decision.REJECT, message="already refunded"),
        }
        done = agent.run_segment(state, context(decisions))

        assert done.goto is None and not done.gates
        final = agent.compiled.get_state({"configurable": {"thread_id": "lg-parallel-1"}}).values
        assert sorted(final["outcomes"]) == [
            "ORD-1001: approve",
            "ORD-1003: reject Rejected by a human reviewer: already refunded",
        ]
    finally:
        agent.saver.close()  # type: ignore[attr-defined]
