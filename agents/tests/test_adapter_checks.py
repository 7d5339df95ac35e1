"""Adapter checks that refuse odd input up front instead of failing a later step."""

from typing import Any

import pytest
from langchain_core.messages import HumanMessage
from langchain_core.tools import tool

from agents.adapters.langgraph_agent import LangGraphAgent, _asked, _chat
from agents.tests.test_langgraph_edits import Chat, agent_of, answer, stored
from agents.tools import Approval, ToolArgumentsError

pytestmark = pytest.mark.django_db(transaction=True)


@tool
def refund(order_id: str, amount_cents: int) -> str:
    """Refund an order."""
    return "ok"


def test_an_edit_whose_call_arguments_are_not_text_is_refused_before_it_is_stored() -> None:
    chat = agent_of(answer, Chat)
    before = stored(chat, "lg-check-1", {"messages": [HumanMessage("hello", id="h-c1")]})
    call = {"id": "c1", "type": "function", "function": {"name": "refund", "arguments": {"a": 1}}}
    odd = {"role": "assistant", "content": "", "tool_calls": [call]}
    errors = chat.edit_errors(before=before, after={**before, "messages": [*before["messages"], odd]})
    assert any(k.startswith("messages.2") for k in errors)
    chat.saver.close()  # type: ignore[attr-defined]


def test_chat_compares_arguments_that_are_not_json() -> None:
    proposed = [{"tool_calls": [{"id": "c1", "function": {"name": "f", "arguments": "not json"}}]}]
    from langchain_core.messages import AIMessage

    message = AIMessage("", id="a", tool_calls=[{"id": "c1", "name": "f", "args": {"x": 1}}])
    [shown] = _chat([message], before=proposed)
    assert shown["tool_calls"][0]["edited"] is True


def test_an_edit_with_an_unknown_argument_is_refused_naming_it() -> None:
    agent = LangGraphAgent(name="lg-check-2", graph=agent_of(answer, Chat).graph, tools=[refund])
    with pytest.raises(ToolArgumentsError) as caught:
        agent.validate_edit("refund", {"order_id": "X", "amount_cents": 3, "extra": 1})
    assert "extra" in str(caught.value.errors)
    assert agent.validate_edit("refund", {"order_id": "X", "amount_cents": 3}) == {
        "order_id": "X",
        "amount_cents": 3,
    }


@pytest.mark.parametrize(
    ("value", "says"),
    [
        ({"action_requests": [], "review_configs": []}, "asks about no action"),
        ({"action_requests": [{"name": "f", "args": ["a"]}]}, "args"),
        ({"action_requests": [{"name": "f", "args": "x"}]}, "args"),
        ({"action_requests": [{"args": {}}]}, "name"),
        ({"action_requests": [{"name": "f"}], "review_configs": ["x"]}, "review_configs"),
        ({"action_requests": "x"}, "action_requests"),
        ([{"action_request": {"args": {}}}], "action"),
    ],
)
def test_an_interrupt_gatehouse_cannot_read_is_refused_saying_what_is_wrong(value: Any, says: str) -> None:
    with pytest.raises(ValueError, match=says):
        _asked(value)


def test_an_adapters_approvals_are_checked_as_a_native_agents_are() -> None:
    from agents.adapters.pydanticai import PydanticAIAgent
    from agents.examples.refunds_pydantic_ai import support
    from agents.tools import Approval

    gated = PydanticAIAgent(
        name="pa-bad",
        agent=support,
        gates={"issue_refund": Approval(queue="Bad Queue!", decisions=("maybe",))},  # type: ignore[arg-type]
    )
    errors = " | ".join(gated.definition_errors())
    assert "queue 'Bad Queue!' must match" in errors and "unknown decision 'maybe'" in errors

    graph = LangGraphAgent(
        name="lg-bad",
        graph=agent_of(answer, Chat).graph,
        queue="Bad Queue!",
        approvals={"refund": Approval(decisions=())},
    )
    errors = " | ".join(graph.definition_errors())
    assert "queue 'Bad Queue!' must match" in errors and "at least one decision" in errors
    assert LangGraphAgent(name="lg-good", graph=agent_of(answer, Chat).graph).definition_errors() == []


def test_an_openai_agents_sdk_agents_bad_gates_are_named_at_startup() -> None:
    from agents.adapters.openai_agents_sdk import OpenAIAgentsSDKAgent
    from agents.adapters.openai_sdk import Agent, function_tool
    from agents.examples.refunds_openai_agents import lookup_order, support
    from agents.tools import Approval

    @function_tool
    def issue_refund(order_id: str, amount_cents: int) -> str:  # forgot needs_approval=True
        """Refund an order."""
        return "ok"

    @function_tool(needs_approval=True)
    def close_account(customer: str) -> str:
        """Close an account."""
        return "ok"

    unguarded = Agent(name="unguarded", tools=[lookup_order, issue_refund, close_account])
    errors = OpenAIAgentsSDKAgent(
        name="oa-bad",
        agent=unguarded,
        gates={"issue_refund": Approval(queue="Bad Queue!"), "send_email": Approval()},
    ).definition_errors()

    assert "tool 'issue_refund' is gated here: declare it function_tool(needs_approval=True)" in errors
    assert "gate 'send_email' names no tool of the OpenAI Agents SDK agent" in errors
    assert "tool 'close_account' needs approval: name it in gates, with its queue" in errors
    assert any("queue 'Bad Queue!' must match" in e for e in errors)
    good = OpenAIAgentsSDKAgent(
        name="oa-good", agent=support, gates={"issue_refund": Approval(queue="refunds")}
    )
    assert good.definition_errors() == []


def test_an_openai_agents_sdk_agent_with_handoffs_is_refused_at_startup() -> None:
    from agents.adapters.openai_agents_sdk import OpenAIAgentsSDKAgent
    from agents.adapters.openai_sdk import Agent
    from agents.examples.refunds_openai_agents import support

    triage = Agent(name="triage", tools=support.tools, handoffs=[Agent(name="billing")])
    errors = OpenAIAgentsSDKAgent(
        name="oa-handoffs", agent=triage, gates={"issue_refund": Approval(queue="refunds")}
    ).definition_errors()

    assert "handoffs are not supported: a segment runs one agent" in errors


def test_an_openai_agents_sdk_edit_is_checked_by_the_tools_own_argument_model() -> None:
    from agents.registry import registry

    agent = registry.get("refunds_openai_agents")
    assert agent.validate_edit("issue_refund", {"order_id": "ORD-1001", "amount_cents": "250"}) == {
        "order_id": "ORD-1001",
        "amount_cents": 250,
    }
    with pytest.raises(ToolArgumentsError) as caught:
        agent.validate_edit("issue_refund", {"order_id": "ORD-1001", "amount_cents": 0})
    assert "amount_cents" in caught.value.errors
