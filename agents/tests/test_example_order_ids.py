"""The refunds agents (native, pydantic-ai, LangGraph, OpenAI Agents SDK) validate an order id
the same way."""

import pytest

from agents.registry import registry
from agents.tools import ToolArgumentsError

REFUNDS_AGENTS = ["refunds", "refunds_pydantic_ai", "refunds_langgraph", "refunds_openai_agents"]


@pytest.mark.parametrize("agent", REFUNDS_AGENTS)
@pytest.mark.parametrize("blank", ["", "   ", "\t\n"])
def test_a_blank_order_id_is_refused(agent: str, blank: str) -> None:
    with pytest.raises(ToolArgumentsError) as caught:
        registry.get(agent).validate_edit("issue_refund", {"order_id": blank, "amount_cents": 100})
    assert "order_id" in str(caught.value.errors)


@pytest.mark.parametrize("agent", REFUNDS_AGENTS)
def test_an_order_id_is_stripped(agent: str) -> None:
    edited = registry.get(agent).validate_edit(
        "issue_refund", {"order_id": " ORD-1001 ", "amount_cents": 100}
    )
    assert edited == {"order_id": "ORD-1001", "amount_cents": 100}


@pytest.mark.parametrize("agent", REFUNDS_AGENTS)
def test_an_order_id_past_40_characters_is_refused(agent: str) -> None:
    with pytest.raises(ToolArgumentsError):
        registry.get(agent).validate_edit("issue_refund", {"order_id": "O" * 41, "amount_cents": 100})
